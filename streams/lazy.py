"""A package's public names, each imported from its module when first asked for (PEP 562).

``streams.core`` and ``streams.client`` export names from several modules,
but a command that needs one of them must not pay for all: the CLI's
``reply`` would load the decision rules and jsonschema, its ``status``
confluent-kafka and fastavro (0.1-0.3 s of start-up; issue 31).  So the
package imports nothing at first, and `exports` gives it the module-level
``__getattr__`` and ``__dir__`` that import a name's module on first use.

A name's home is the first of the package's ``modules`` whose ``__all__``
lists it: the modules name their own public names, the package says which
of them it exports (its ``__all__``) and where to look, lightest first, so
that asking for a light name never imports a heavy module.  A module that
lists a name it only re-exports (``streams.client.client`` lists
``WaitKey``) gives the same object, wherever the search finds it.

This module imports nothing of xwait's: the pure core uses it too.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["exports"]


def exports(package: str, modules: Sequence[str], public: Sequence[str]
            ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__, __dir__`` for `package`, which exports `public` from its `modules`.

    A name found is kept in the package's namespace, so it is looked up once.
    """
    public_set = frozenset(public)

    def attribute(name: str) -> Any:
        if name in public_set:
            for module_name in modules:
                module = importlib.import_module(f"{package}.{module_name}")
                if name in getattr(module, "__all__", ()):
                    value = getattr(module, name)
                    vars(sys.modules[package])[name] = value
                    return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def names() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public_set})

    return attribute, names
