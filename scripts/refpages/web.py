"""docs/reference/web-api.md and metrics.md: every route a worker serves, every metric a
worker and the webhook adapter export."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from refpages.markdown import HEADER, REPO, Undocumented, code, table

# ---------------------------------------------------------------- the web API


View = ast.ClassDef | ast.AsyncFunctionDef | ast.FunctionDef


def _routes() -> list[tuple[str, str, str, str]]:
    """(path, methods, docstring, module) of every `app.page(...)` under streams/."""
    import importlib

    routes = []
    for path in sorted((REPO / "streams").rglob("*.py")):
        tree = ast.parse(path.read_text())
        name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")

        def lookup(constant: str, module: str = name) -> Any:
            return getattr(importlib.import_module(module), constant)

        for expression, view in _pages(tree):
            route = _literal(expression, lookup)
            doc = ast.get_docstring(view) or ""
            if not doc:
                raise Undocumented(f"{name}: the view of {route} has no docstring")
            methods = (["GET"] if not isinstance(view, ast.ClassDef) else
                       [n.name.upper() for n in view.body if isinstance(n, ast.AsyncFunctionDef)
                        and n.name in ("get", "post", "put", "delete")])
            routes.append((route, ", ".join(methods), doc, name))
    return sorted(routes)


def _pages(tree: ast.Module) -> Iterator[tuple[ast.expr, View]]:
    """(path, view) of every `@app.page(path)` and `app.page(path)(view)` in `tree`."""
    defined = {n.name: n for n in ast.walk(tree)
               if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, View):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and _is_page(decorator.func):
                    yield decorator.args[0], node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call) \
                and _is_page(node.func.func) and node.args \
                and isinstance(node.args[0], ast.Name) and node.args[0].id in defined:
            yield node.func.args[0], defined[node.args[0].id]


def _is_page(func: ast.expr) -> bool:
    return isinstance(func, ast.Attribute) and func.attr == "page"


def _literal(node: ast.AST, lookup: Callable[[str], Any]) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name):
                parts.append(str(lookup(value.value.id)))
        return "".join(parts)
    raise SystemExit(f"app.page with a path that is not a literal: {ast.dump(node)}")


def web_api() -> str:
    rows = [[f"`{methods} {path}`", doc, f"`{module}`"] for path, methods, doc, module
            in _routes()]
    return (
        HEADER + "# Web API reference\n\n"
        "Every route a worker serves on `XWAIT_WEB_HOST:XWAIT_WEB_PORT` (127.0.0.1:6066 "
        "by default), from the code that registers it. Who may call what (the read "
        "and command tokens) and how requests are forwarded between workers is in "
        "[the ops console guide](../guides/console.md#the-web-api).\n\n"
        + table(["method and path", "what", "served by"], rows))


# ---------------------------------------------------------------- metrics


class _Host:
    """Just enough of a worker (`streams.console.host.ConsoleHost`) for its metrics to
    be collected once: one definition, one owned partition, nothing decided."""

    def __init__(self) -> None:
        import asyncio

        from streams.config import Settings

        self.settings = Settings()
        self.definitions: Mapping[str, Any] = {"example": None}
        self.counters: dict[str, int] = {}
        self.observers: list[Any] = []
        self.ready = asyncio.Event()
        self.census = self
        self.index = self

    def totals(self, partitions: Any) -> dict[tuple[str, str], int]:
        return {}

    def count_due(self, now_ms: int, partitions: Any) -> int:
        return 0

    def owned_partitions(self) -> set[int]:
        return {0}

    def armed_timers(self) -> int:
        return 0

    def input_lag(self) -> dict[tuple[str, int], int]:
        return {}

    def stats(self) -> dict[str, Any]:
        return {}


def _families(registry: Any, exporter: str) -> list[list[str]]:
    # A metric with labels and no child yet has no samples to read its labels
    # from: its declared label names, which prometheus_client keeps private.
    declared = {m._name: m._labelnames  # noqa: SLF001
                for m in getattr(registry, "_collector_to_names", {})
                if hasattr(m, "_labelnames")}
    rows = []
    for family in registry.collect():
        if not family.name.startswith("xwait_"):
            continue
        if not family.documentation:
            raise Undocumented(f"the metric {family.name} has no help text")
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = sorted({k for s in family.samples for k in s.labels if k != "le"}
                        | set(declared.get(family.name, ())))
        shown = name + (f"{{{','.join(labels)}}}" if labels else "")
        rows.append([code(shown), family.type, family.documentation, exporter])
    return rows


def metrics() -> str:
    from streams.adapter.webhook import Metrics as WebhookMetrics
    from streams.console.metrics import Metrics

    worker = _families(Metrics(_Host()).registry, "worker (`/metrics`)")  # type: ignore[arg-type]
    webhook = _families(WebhookMetrics().registry, "webhook adapter")
    return (
        HEADER + "# Metrics reference\n\n"
        "Every metric a worker exports on `/metrics` (Prometheus text format 0.0.4; "
        "each worker reports its own partitions), and the webhook adapter on its own "
        "port (`XWAIT_WEBHOOK_METRICS_PORT`), from their registries. Label values "
        "known in advance (every definition, state, action, reason) are exported at 0 "
        "rather than left out. Beside these, prometheus_client's own `process_*`, "
        "`python_gc_*` and `python_info`. What to watch and alert on is in "
        "[monitoring](../guides/monitoring.md).\n\n"
        + table(["metric", "type", "what", "exported by"], worker + webhook))
