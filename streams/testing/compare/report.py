"""What a comparison shows: xwait's figure divided by each other system's of the same round,
the Markdown tables (every run, every round) and the plot."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from streams.config import REPO_ROOT
from streams.testing.compare.workloads import (
    BY_NAME,
    LABELS,
    PIPES,
    RATIO_FIGURES,
    SYSTEMS,
    WORKLOADS,
    applies,
)
from streams.testing.harness.report import publish, pyplot


def ratios(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """xwait's figure ÷ another system's, both from the same round and workload."""
    out = []
    by = {(r["round"], r["workload"], r["system"]): r for r in runs if r["figures"]}
    for (rnd, workload, system), run in sorted(by.items()):
        if system == "xwait":
            continue
        mine = by.get((rnd, workload, "xwait"))
        if mine is None:
            continue
        for figure, higher in RATIO_FIGURES[workload]:
            a = mine["figures"].get(figure)
            b = run["figures"].get(figure)
            if figure == "escalations_per_s" and system in PIPES:
                b = run["figures"].get("events_per_s")  # a request record per escalation
            if not a or not b:
                continue
            out.append({"round": rnd, "workload": workload, "figure": figure, "over": system,
                        "ratio": round(a / b, 4), "higher_is_better": higher})
    return out


def values(runs: list[dict[str, Any]], workload: str, system: str, figure: str
           ) -> list[float | None]:
    return [r["figures"].get(figure) if r["figures"] else None
            for r in sorted(runs, key=lambda r: r["round"])
            if r["workload"] == workload and r["system"] == system]


def fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float | int):
        if abs(value) >= 100 or digits == 0:
            return f"{value:,.0f}"
        return f"{value:,.{digits}f}"
    return str(value)


def stage_rounds(runs: list[dict[str, Any]], workload: str, stage: str) -> str:
    """`p99 / max, p99 / max, ...` of one of xwait's record stages, per round."""
    p99s = values(runs, workload, "xwait", f"{stage}_p99_ms")
    maxes = values(runs, workload, "xwait", f"{stage}_max_ms")
    return ", ".join(f"{fmt(a, 0)} / {fmt(b, 0)}" for a, b in zip(p99s, maxes, strict=True))


def per_round(vals: Iterable[Any], digits: int = 0) -> str:
    return " / ".join(fmt(v, digits) for v in vals) or "–"


def machine_line(result: dict[str, Any]) -> str:
    m, v = result["machine"], result["versions"]
    loads = [r["loadavg_before"][0] for r in result["runs"]] + \
            [r["loadavg_after"][0] for r in result["runs"]]
    load = f"{min(loads):.2f}–{max(loads):.2f}" if loads else "–"
    commit = (v.get("git_commit") or "?")[:10] + (" with local changes" if v.get("git_dirty")
                                                  else "")
    where = result["parameters"]
    return (f"{m['nproc']} CPUs ({m.get('cpu_model') or m['cpu']}), {m['mem_total_mib']:,} MiB, "
            f"{m['platform']}; Python {v['python']}, confluent-kafka {v.get('confluent-kafka')} "
            f"(librdkafka {v['librdkafka']}), {v.get('java') or 'no Java'}, Kafka Streams "
            f"{v.get('kafka_streams') or '–'}; xwait {commit}; broker {where['bootstrap']}, "
            f"{where['partitions']} partitions; 1-minute load average during the "
            f"runs {load}")


def table(result: dict[str, Any], png_name: str | None) -> str:
    """Markdown: one table per workload, every run's figure, the ratios per round."""
    runs, p = result["runs"], result["parameters"]
    systems = [s for s in SYSTEMS if s in p["systems"]]
    rounds = p["rounds"]
    rat = result["ratios"]

    def ratio(workload: str, figure: str, system: str) -> str:
        found = [r["ratio"] for r in sorted(rat, key=lambda r: r["round"])
                 if r["workload"] == workload and r["figure"] == figure and r["over"] == system]
        return " / ".join(f"{x:.3g}" for x in found) or "–"

    def correctness(workload: str, system: str) -> str:
        parts = []
        for r in sorted(runs, key=lambda r: r["round"]):
            if r["workload"] != workload or r["system"] != system:
                continue
            f = r["figures"]
            if not r["ok"] and not f:
                parts.append("failed")
                continue
            bad = {k: f.get(k) for k in ("missing", "wrong_outcome", "duplicate_outcome_ids",
                                         "conflicting_outcomes") if f.get(k)}
            parts.append("ok" if not bad else ", ".join(f"{k} {v}" for k, v in bad.items()))
        return " / ".join(parts) or "–"

    lines = [f"Machine: {machine_line(result)}. {rounds} round(s), systems interleaved, order "
             f"reversed in every second round; every run is shown (round 1 / round 2 / ...). "
             f"Run on {result['timestamp']} with `bench/compare.py` ({result['file']}).", ""]
    if p.get("xwait_processes", 1) > 1:
        lines += [f"xwait ran as `xwait worker --processes {p['xwait_processes']}`: that many "
                  "worker processes under one supervisor, their CPU summed.", ""]
    for note in result["notes"]:
        lines.append(f"Note: {note}")
    if result["notes"]:
        lines.append("")
    present = [w for w in WORKLOADS if w in p["workloads"]]
    for name in present:
        w = BY_NAME[name]
        here = [s for s in systems if applies(s, w)
                and any(r["workload"] == name and r["system"] == s for r in runs)]
        if name == "drain":
            lines += [f"**(a) Drain W1, {p['waits']:,} waits** (`--definition bench-long --mix "
                      "replies`): CPU µs per input event (utime+stime of the processor's "
                      "processes over the run, start-up included; lower is better) and input "
                      "events/s (higher is better).", "",
                      "| system | CPU µs/event | xwait ÷ system (CPU) | events/s | "
                      "xwait ÷ system | first outcome (s) | peak RSS (MiB) "
                      "| outcomes |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'cpu_us_per_event', s)} | "
                    f"{per_round(values(runs, name, s, 'events_per_s'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'events_per_s', s)} | "
                    f"{per_round(values(runs, name, s, 'first_outcome_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
        elif name == "storm":
            lines += [f"**(b) Timer storm, {p['waits']:,} waits** (`--definition bench --mix "
                      "silent --deadline-s 3`, every deadline due when the processor starts): "
                      "escalations/s, higher is better (the pipes: request records/s); CPU µs "
                      "per input event, start-up included.", "",
                      "| system | CPU µs/event | escalations/s | xwait ÷ system | first "
                      "escalation (s) | after the last park (s) | timer records | timers fired "
                      "| peak RSS (MiB) | outcomes |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                fig = "events_per_s" if s in PIPES else "escalations_per_s"
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{per_round(values(runs, name, s, fig))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'escalations_per_s', s)} | "
                    f"{per_round(values(runs, name, s, 'first_outcome_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'first_escalation_after_last_park_s'), 1)}"
                    " | "
                    f"{per_round(values(runs, name, s, 'timer_records'))} | "
                    f"{per_round(values(runs, name, s, 'timers_fired'))} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
        else:
            lines += [f"**(c) Open W1 at {p['rate']:g} requests/s for {p['seconds']:g} s** "
                      "(`--mode open --mix w1`): CPU µs per input event over the load (after "
                      "start-up: its CPU-s beside it), milliseconds, lower is better.", "",
                      "| system | CPU µs/event | xwait ÷ system (CPU) | start-up CPU-s | "
                      "reply→outcome p50 | p99 | deadline lateness p99 | xwait ÷ "
                      "system (p99) | events/s | peak RSS (MiB) | outcomes |",
                      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
            for s in here:
                lines.append(
                    f"| {LABELS[s]} | {per_round(values(runs, name, s, 'cpu_us_per_event'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'cpu_us_per_event', s)} | "
                    f"{per_round(values(runs, name, s, 'startup_cpu_s'), 1)} | "
                    f"{per_round(values(runs, name, s, 'reply_p50_ms'))} | "
                    f"{per_round(values(runs, name, s, 'reply_p99_ms'))} | "
                    f"{per_round(values(runs, name, s, 'lateness_p99_ms'))} | "
                    f"{'–' if s == 'xwait' else ratio(name, 'reply_p99_ms', s)} | "
                    f"{per_round(values(runs, name, s, 'events_per_s'))} | "
                    f"{per_round(values(runs, name, s, 'peak_rss_mib'))} | "
                    f"{correctness(name, s)} |")
            if any(v is not None for v in values(runs, name, "xwait", "loop_lag_p99_ms")):
                lines += ["", "xwait's event loop lag over the load, the worst 5-second "
                          "window (ms, per round): p99 "
                          f"{per_round(values(runs, name, 'xwait', 'loop_lag_p99_ms'))}, max "
                          f"{per_round(values(runs, name, 'xwait', 'loop_lag_max_ms'))}."]
            if any(v is not None for v in values(runs, name, "xwait", "durable_max_ms")):
                lines += ["", "xwait's own view of a record's path, ms from its broker append, "
                          "the worst p99 / max any stats answer showed (per round): fetched "
                          f"{stage_rounds(runs, name, 'taken')}; released in append order "
                          f"{stage_rounds(runs, name, 'released')}; decided and durable "
                          f"{stage_rounds(runs, name, 'durable')}."]
        lines.append("")
    lines += ["Every run, in the order run (load average = 1 minute, before → after):", "",
              "| # | round | workload | system | headline | load | wall (s) | result |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    warm: dict[str, Any] | None = result.get("warm_up")
    shown: list[tuple[int | str, dict[str, Any]]] = [("–", warm)] if warm else []
    for i, r in shown + list(enumerate(runs, 1)):
        w = BY_NAME[r["workload"]]
        head = w.headline if r["system"] not in PIPES else "events_per_s"
        value = r["figures"].get(head) if r["figures"] else None
        lines.append(f"| {i} | {r['round'] or 'warm-up'} | {r['workload']} | "
                     f"{LABELS[r['system']]} | "
                     f"{head} {fmt(value)} | {r['loadavg_before'][0]:.2f} → "
                     f"{r['loadavg_after'][0]:.2f} | {r['wall_s']:.0f} | "
                     f"{'ok' if r['ok'] else r['error']}"
                     f"{' (not compared)' if r is warm else ''} |")
    if png_name:
        lines += ["", f"![events/s and latency per system]({png_name})"]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    """Bars: the mean over rounds; dots: every run. One panel per workload."""
    plt = pyplot()

    runs, p = result["runs"], result["parameters"]
    systems = [s for s in SYSTEMS if s in p["systems"]]
    panels: list[tuple[str, str, list[tuple[str, str]]]] = []
    if "drain" in p["workloads"]:
        panels.append(("drain", f"(a) drain W1, {p['waits']:,} waits: input events/s",
                       [("events_per_s", "events/s")]))
    if "storm" in p["workloads"]:
        panels.append(("storm", f"(b) timer storm, {p['waits']:,} waits: escalations/s",
                       [("escalations_per_s", "escalations/s")]))
    if "open" in p["workloads"]:
        panels.append(("open", f"(c) open W1 at {p['rate']:g}/s for {p['seconds']:g} s: ms",
                       [("reply_p50_ms", "reply→outcome p50"),
                        ("reply_p99_ms", "reply→outcome p99"),
                        ("lateness_p99_ms", "deadline lateness p99")]))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (workload, title, figs) in zip(axes[0], panels, strict=True):
        here = [s for s in systems if applies(s, BY_NAME[workload])]
        width = 0.8 / len(figs)
        top: list[float] = []
        for j, (figure, label) in enumerate(figs):
            for i, s in enumerate(here):
                key = "events_per_s" if (s in PIPES and workload == "storm") else figure
                mine = [r for r in sorted(runs, key=lambda r: r["round"])
                        if r["workload"] == workload and r["system"] == s
                        and r["figures"].get(key) is not None]
                got = [float(r["figures"][key]) for r in mine]
                x = i + (j - (len(figs) - 1) / 2) * width
                if got:
                    ax.bar(x, statistics.fmean(got), width * 0.9, color=colors[j % len(colors)],
                           label=label if i == 0 else None)
                    ax.scatter([x] * len(got), got, s=14, zorder=3,  # red: an incomplete run
                               color=["black" if r["ok"] else "red" for r in mine])
                    top += got
        ax.set_xticks(range(len(here)), [
            LABELS[s] + ("\n(records/s)" if s in PIPES and workload == "storm" else "")
            for s in here], rotation=15)
        ax.set_title(title, fontsize=10)
        positive = [v for v in top if v > 0]
        if positive and max(positive) / min(positive) > 30:
            ax.set_yscale("log")
        if len(figs) > 1:
            ax.legend(fontsize=8, loc="upper right")  # fixed: see scale/report.py
        ax.grid(axis="y", alpha=0.3)
    m = result["machine"]
    fig.suptitle(f"xwait side by side: {m['nproc']} CPUs, {result['timestamp']}; bars = mean of "
                 f"{p['rounds']} round(s), dots = every run (red: outcomes missing or wrong)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary_lines(runs: list[dict[str, Any]]) -> Iterator[str]:
    for r in runs:
        f = r["figures"]
        head = BY_NAME[r["workload"]].headline if r["system"] not in PIPES else "events_per_s"
        yield (f"  round {r['round']} {r['workload']:5} {r['system']:8} {head}="
               f"{f.get(head) if f else None} load {r['loadavg_before'][0]:.2f}->"
               f"{r['loadavg_after'][0]:.2f} {'ok' if r['ok'] else r['error']}")


def finish(result: dict[str, Any], out: Path, png: Path, out_dir: Path,
           target: Path | None) -> None:
    """The plot, compare-latest.png/.md and the JSON again (with any note the plot added);
    the plot also copied to `target` (a tracked path a page shows), which the table links."""
    drawn: Path | None = png
    try:
        plot(result, png)
    except Exception as exc:  # a plot that fails still leaves the JSON and the table
        result["notes"].append(f"no plot: {type(exc).__name__}: {exc}")
        drawn = None
    shown = drawn.name if drawn is not None else None
    if drawn is not None:
        shutil.copy(drawn, out_dir / "compare-latest.png")
        published = publish(drawn, target)
        if published is not None:
            shown = os.path.relpath(published.resolve(), REPO_ROOT)
    latest = out_dir / "compare-latest.md"
    latest.write_text(table(result, shown), encoding="utf-8")
    out.write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"compare: wrote {out}, {drawn}, {latest}")


__all__ = ["finish", "machine_line", "plot", "ratios", "summary_lines", "table"]
