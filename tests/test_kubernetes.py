"""deploy/kubernetes/ is valid Kubernetes and wires the worker the way the README says.

Validated offline against the official OpenAPI schemas that the pinned
`kubernetes-validate` package ships (strict: an unknown field is an error).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from streams.cli.supervisor import STOP_WAIT_S

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "deploy" / "kubernetes"
KUBERNETES = "1.30"  # the oldest release still maintained when this was written


def _manifests() -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(FOLDER.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        (doc,) = list(yaml.safe_load_all(path.read_text()))
        found[doc["kind"]] = doc
    return found


@pytest.mark.parametrize("path", sorted(p.name for p in FOLDER.glob("*.yaml")
                                        if p.name != "kustomization.yaml"))
@pytest.mark.parametrize("version", [KUBERNETES, kubernetes_validate.latest_version()])
def test_every_manifest_is_valid_against_the_official_schemas(path: str, version: str) -> None:
    for doc in yaml.safe_load_all((FOLDER / path).read_text()):
        kubernetes_validate.validate(doc, version, strict=True)


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((FOLDER / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in FOLDER.glob("*.yaml") if p.name != "kustomization.yaml")


def test_the_statefulset_keeps_rocksdb_on_a_volume_and_probes_health_and_readiness() -> None:
    m = _manifests()
    sts, config = m["StatefulSet"], m["ConfigMap"]
    pod = sts["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    mounts = {v["name"]: v["mountPath"] for v in worker["volumeMounts"]}
    claims = [c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]]
    assert mounts[claims[0]] == config["data"]["XWAIT_DATA_DIR"], "RocksDB on the volume"
    assert worker["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert worker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert worker["startupProbe"]["httpGet"]["path"] == "/healthz"
    (port,) = worker["ports"]
    assert str(port["containerPort"]) == config["data"]["XWAIT_WEB_PORT"]
    assert config["data"]["XWAIT_WEB_HOST"] == "0.0.0.0"  # noqa: S104 - probes come from outside
    assert sts["spec"]["serviceName"] == m["Service"]["metadata"]["name"]


def test_the_grace_period_covers_the_prestop_and_a_worker_handing_its_partitions_over() -> None:
    from streams.processor.takeover import STOP_COMMIT_WAIT_S

    pod = _manifests()["StatefulSet"]["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    pre_stop = worker["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    grace = pod["terminationGracePeriodSeconds"]
    assert grace >= int(pre_stop[1]) + STOP_COMMIT_WAIT_S + 10
    assert STOP_WAIT_S > STOP_COMMIT_WAIT_S, "the supervisor outwaits its workers too"


def test_service_and_budget_select_the_workers_and_the_service_is_headless() -> None:
    m = _manifests()
    labels = m["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    service = m["Service"]["spec"]
    assert service["clusterIP"] == "None"
    assert service["publishNotReadyAddresses"] is True, "peers forward to a catching-up owner"
    assert service["selector"].items() <= labels.items()
    budget = m["PodDisruptionBudget"]["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert budget["maxUnavailable"] == 1


def test_the_configmap_sets_only_settings_the_code_reads_and_production_replication() -> None:
    code = "".join(p.read_text() for p in (REPO / "streams").rglob("*.py"))
    known = set(re.findall(r'"(XWAIT_[A-Z_]+)"', code))
    data = _manifests()["ConfigMap"]["data"]
    assert set(data) <= known, sorted(set(data) - known)
    assert data["XWAIT_REPLICATION_FACTOR"] == "3"
    assert data["XWAIT_MIN_INSYNC_REPLICAS"] == "2"
