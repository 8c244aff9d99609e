"""The scale bench's report: the figures per checkpoint, issue 10's targets judged against
them, the Markdown table and the plot (from a result alone: `--plot-only` draws an old one)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streams.testing.harness.figures import dig
from streams.testing.harness.report import pyplot

# The done-when targets of issue 10, checked against the largest checkpoint run.
RSS_LIMIT_MIB = 1536.0
PARKS_RATIO_MIN = 0.8
TICK_RATIO_MAX = 2.0
API_LIMIT_MS = 100.0
RESTART_LIMIT_S = 10.0
RESTORE_MIN_ROWS_S = 17_000.0
STANDBY_LIMIT_S = 5.0

def figure_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One flat row of the headline figures per checkpoint."""
    rows = []
    for cp in result.get("checkpoints", []):
        tick = cp.get("tick_idle") or cp.get("tick_under_load") or {}
        rows.append({
            "n": cp["n"],
            "rss_mib": dig(cp, "memory", "rss_mib"),
            "vmhwm_mib": dig(cp, "memory", "vmhwm_mib"),
            "bytes_per_wait": dig(cp, "disk", "bytes_per_wait"),
            "parks_per_s": dig(cp, "segment", "parks_per_s"),
            "tick_p50_ms": tick.get("tick_p50_ms"), "tick_p99_ms": tick.get("tick_p99_ms"),
            "scan_us_p50": tick.get("scan_us_p50"), "scan_us_p99": tick.get("scan_us_p99"),
            "status_p50_ms": dig(cp, "api", "status_ms", "p50"),
            "status_p99_ms": dig(cp, "api", "status_ms", "p99"),
            "list_p50_ms": dig(cp, "api", "list_ms", "p50"),
            "list_p99_ms": dig(cp, "api", "list_ms", "p99"),
            "restart_ready_s": dig(cp, "restart", "ready_s"),
            "restore_rows_per_s": dig(cp, "restore", "rows_per_s"),
            "restore_ready_s": dig(cp, "restore", "ready_s"),
            "standby_takeover_s": dig(cp, "standby", "ready_s"),
            "sample_exactly_once": dig(cp, "sample", "exactly_once"),
            "lost_waits": lost_waits(cp),
            "loadavg": cp.get("loadavg_measured") or cp.get("loadavg_before"),
        })
    return rows


PHASES = ("segment", "restart", "restore", "standby")


def lost_waits(cp: dict[str, Any]) -> dict[str, int] | None:
    """Per phase of a checkpoint: waits the worker should hold and its census lacks."""
    found = {phase: int(dig(cp, phase, "census", "missing"))
             for phase in PHASES if dig(cp, phase, "census", "missing") is not None}
    return found or None


def _ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b:
        return None
    return round(float(a) / float(b), 3)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's done-when figures, judged at the largest checkpoint that measured each."""
    rows = figure_rows(result)
    out: list[dict[str, Any]] = []

    def last(name: str) -> dict[str, Any] | None:
        having = [r for r in rows if r.get(name) is not None]
        return having[-1] if having else None

    def add(name: str, want: str, at: dict[str, Any] | None, value: Any, ok: bool | None,
            **extra: Any) -> None:
        out.append({"target": name, "want": want, "at_n": None if at is None else at["n"],
                    "value": value, "ok": ok, "final": at is not None and at["n"] >= 10_000_000,
                    **extra})

    r = last("rss_mib")
    add("rss", f"RSS <= {RSS_LIMIT_MIB:.0f} MiB at 10M", r, r and r["rss_mib"],
        None if r is None else r["rss_mib"] <= RSS_LIMIT_MIB,
        vmhwm_mib=r and r["vmhwm_mib"])
    first = rows[0] if rows else None
    r = last("parks_per_s")
    ratio = _ratio(r and r["parks_per_s"], first and first["parks_per_s"])
    add("parks_ratio", f"parks/s at 10M >= {PARKS_RATIO_MIN} x parks/s at 10k", r, ratio,
        None if ratio is None or r is first else ratio >= PARKS_RATIO_MIN)
    r = last("tick_p50_ms")
    tick = _ratio(r and r["tick_p50_ms"], first and max(first["tick_p50_ms"] or 0, 1))
    scan = _ratio(r and r["scan_us_p50"], first and max(first["scan_us_p50"] or 0, 1))
    add("tick_ratio", f"tick cost at 10M / at 10k <= {TICK_RATIO_MAX} (tick p50 and scan_us "
        "p50)", r, {"tick_p50": tick, "scan_us_p50": scan},
        None if tick is None or scan is None or r is first
        else tick <= TICK_RATIO_MAX and scan <= TICK_RATIO_MAX)
    for figure, label in (("status_p99_ms", "status"), ("list_p99_ms", "list")):
        r = last(figure)
        add(label, f"{label} through the web API <= {API_LIMIT_MS:.0f} ms (p99) at 10M", r,
            r and r[figure], None if r is None else r[figure] <= API_LIMIT_MS,
            p50=r and r[figure.replace("p99", "p50")])
    r = last("restart_ready_s")
    add("restart", f"restart on its own disk ready <= {RESTART_LIMIT_S:.0f} s at 10M", r,
        r and r["restart_ready_s"], None if r is None else r["restart_ready_s"]
        <= RESTART_LIMIT_S)
    restored, took = last("restore_rows_per_s"), last("standby_takeover_s")
    ok_restore = None if restored is None else restored["restore_rows_per_s"] >= RESTORE_MIN_ROWS_S
    ok_standby = None if took is None else took["standby_takeover_s"] <= STANDBY_LIMIT_S
    add("failover", f"restore >= {RESTORE_MIN_ROWS_S:.0f} rows/s or standby takeover <= "
        f"{STANDBY_LIMIT_S:.0f} s at 1M", took or restored,
        {"restore_rows_per_s": restored and restored["restore_rows_per_s"],
         "restore_at_n": restored and restored["n"],
         "standby_takeover_s": took and took["standby_takeover_s"],
         "standby_at_n": took and took["n"]},
        None if ok_restore is None and ok_standby is None
        else bool(ok_restore) or bool(ok_standby))
    counted = [r for r in rows if r["lost_waits"] is not None]
    lost = {f"{r['n']}/{phase}": k for r in counted for phase, k in r["lost_waits"].items() if k}
    add("no_lost_waits", "after parking and after each restart and failover the worker holds "
        "every wait (its census counts them all)", counted[-1] if counted else None, lost,
        None if not counted else not lost)
    checked = [r for r in rows if r["sample_exactly_once"] is not None]
    add("timers_exactly_once", "every sample wait ends exactly once after each checkpoint's "
        "restart and failovers", checked[-1] if checked else None,
        [r["n"] for r in checked if not r["sample_exactly_once"]],
        None if not checked else all(r["sample_exactly_once"] for r in checked))
    return out


def _fmt(v: Any, digits: int = 0) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float | int):
        return f"{v:,.{digits}f}"
    return str(v)


def table(result: dict[str, Any]) -> str:
    """The figures per checkpoint as a Markdown table, then the targets."""
    head = ("| N | RSS MiB (HWM) | disk B/wait | parks/s | tick p50/p99 ms | scan p50/p99 us | "
            "status p50/p99 ms | list p50/p99 ms | restart s | restore rows/s (s) | "
            "standby s | sample once | lost | load 1/5/15 |")
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in figure_rows(result):
        load = r["loadavg"] or []
        lines.append(
            f"| {r['n']:,} | {_fmt(r['rss_mib'])} ({_fmt(r['vmhwm_mib'])}) | "
            f"{_fmt(r['bytes_per_wait'])} | {_fmt(r['parks_per_s'])} | "
            f"{_fmt(r['tick_p50_ms'])}/{_fmt(r['tick_p99_ms'])} | "
            f"{_fmt(r['scan_us_p50'])}/{_fmt(r['scan_us_p99'])} | "
            f"{_fmt(r['status_p50_ms'], 1)}/{_fmt(r['status_p99_ms'], 1)} | "
            f"{_fmt(r['list_p50_ms'])}/{_fmt(r['list_p99_ms'])} | "
            f"{_fmt(r['restart_ready_s'], 1)} | "
            f"{_fmt(r['restore_rows_per_s'])} ({_fmt(r['restore_ready_s'], 1)}) | "
            f"{_fmt(r['standby_takeover_s'], 1)} | {_fmt(r['sample_exactly_once'])} | "
            f"{_fmt(sum((r['lost_waits'] or {}).values()) if r['lost_waits'] else None)} | "
            f"{'/'.join(f'{x:.1f}' for x in load[:3])} |")
    lines.append("")
    for t in result.get("targets") or targets(result):
        verdict = {True: "holds", False: "MISSED", None: "not measured"}[t["ok"]]
        at = f" at N={t['at_n']:,}" if t["at_n"] is not None else ""
        final = "" if t["final"] or t["ok"] is None else " (10M not run)"
        lines.append(f"* {t['target']}: {verdict}{at}{final}: {t['value']} (want {t['want']})")
    return "\n".join(lines)


PANELS: tuple[tuple[str, str, tuple[str, ...], float | None, bool], ...] = (
    # (title, y label, series, target line, log y)
    ("Resident memory", "MiB", ("rss_mib", "vmhwm_mib"), RSS_LIMIT_MIB, False),
    ("RocksDB on disk", "bytes per wait", ("bytes_per_wait",), None, False),
    ("Parks/s", "waits/s", ("parks_per_s",), None, False),
    ("Punctuator tick", "ms", ("tick_p50_ms", "tick_p99_ms"), None, False),
    ("Reading due timers (scan)", "us", ("scan_us_p50", "scan_us_p99"), None, False),
    ("Status via web API", "ms", ("status_p50_ms", "status_p99_ms"), API_LIMIT_MS, True),
    ("First page of the list via web API", "ms", ("list_p50_ms", "list_p99_ms"),
     API_LIMIT_MS, True),
    ("Restart on its own disk to ready", "s", ("restart_ready_s",), RESTART_LIMIT_S, False),
    ("Restore on an empty disk", "rows/s", ("restore_rows_per_s",), RESTORE_MIN_ROWS_S,
     False),
    ("Standby takeover to ready", "s", ("standby_takeover_s",), STANDBY_LIMIT_S, False),
)


def plot(result: dict[str, Any], path: Path) -> Path:
    """One panel per figure against N (log x); dashed red lines are the issue's targets."""
    plt = pyplot()
    rows = figure_rows(result)
    fig, axes = plt.subplots(3, 4, figsize=(18, 11))
    flat = list(axes.flat)
    ns = [r["n"] for r in rows] or [1]
    for ax, (title, unit, series, limit, logy) in zip(flat, PANELS, strict=False):
        drawn = False
        for name in series:
            pts = [(r["n"], r[name]) for r in rows if r.get(name) is not None]
            if pts:
                drawn = True
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
                for x, y in pts:
                    ax.annotate(f"{y:,.0f}" if abs(y) >= 10 else f"{y:.2g}", (x, y),
                                textcoords="offset points", xytext=(4, 4), fontsize=7)
        if limit is not None:
            ax.axhline(limit, color="red", linestyle="--", linewidth=1, label="target")
        if not drawn:
            ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center",
                    color="grey")
        ax.set_xscale("log")
        ax.set_xlim(min(ns) / 2, max(ns) * 2)
        if logy and drawn:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("parked waits (N)")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        # A fixed corner: matplotlib's "best" one is searched for, and a search that
        # takes over a second on a busy machine warns (an error under the suite).
        ax.legend(fontsize=7, loc="upper left")
    text_ax = flat[len(PANELS)]
    text_ax.axis("off")
    m = result.get("machine", {})
    lines = [f"{m.get('nproc')} cores, {m.get('mem_total_mib')} MiB, {m.get('cpu')}",
             f"{result.get('parameters', {}).get('partitions')} partitions, one worker",
             f"commit {str(dig(result, 'versions', 'git_commit'))[:9]}",
             "load average (1/5/15 min) at each checkpoint:"]
    for r in rows:
        load = r["loadavg"] or []
        lines.append(f"  N={r['n']:,}: " + " / ".join(f"{x:.1f}" for x in load[:3]))
    for cp in result.get("checkpoints", []):
        for phase, why in cp.get("skipped", {}).items():
            lines.append(f"  skipped {phase}: {why}")
    text_ax.text(0, 1, "\n".join(lines), va="top", fontsize=8, family="monospace")
    for ax in flat[len(PANELS) + 1:]:
        ax.axis("off")
    fig.suptitle(f"xwait scale bench, {result.get('timestamp', '')}", fontsize=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


__all__ = ["PANELS", "figure_rows", "lost_waits", "plot", "table", "targets"]
