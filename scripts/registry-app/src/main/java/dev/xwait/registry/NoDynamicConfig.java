package dev.xwait.registry;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;
import java.util.List;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

/**
 * Stands in for the bean that the config-index extension's build step
 * (apicurio-common-app-components-config-index-deployment, not on Maven
 * Central) generates: the list of properties an admin may change at run
 * time.  Empty here, so every setting keeps its application.properties or
 * -D value, which is all a local development registry needs.
 */
@Singleton
public class NoDynamicConfig {

    @Produces
    @Singleton
    DynamicConfigPropertyList dynamicConfigProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
