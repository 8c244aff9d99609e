"""The README's demo: a worker and five waits that show what xwait does.

Run by `make demo` once the broker and the topics are up.  It starts an
`xwait worker` (unless one is already serving this topic prefix), then plays
five stories at once with the `demo-approval` definition (reminders every
3 s, deadline 8 s, then 4 s for the director) and prints every action and
outcome as it arrives:

  A  a reply is received
  B  nobody answers: reminded twice, then escalated to the director, then ESCALATED
  C  an invalid reply goes to review and an operator accepts it
  D  a reply that arrives before its request is held and correlated
  E  a wait suspended for 6 s resumes with the time it had left

It exits 0 when every story ended as described, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.client import Action, Outcome, XwaitClient, new_correlation_key
from streams.config import Settings, from_env

REPO = Path(__file__).resolve().parent.parent
DEFINITION = "demo-approval"
TIMEOUT_S = 90


@dataclass
class Story:
    label: str
    title: str
    expect: Callable[[Outcome], bool]
    key: str = field(default_factory=new_correlation_key)
    outcome: Outcome | None = None
    notes: list[str] = field(default_factory=list)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _stats(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/xwait/stats",  # noqa: S310
                                    timeout=2) as resp:
            data: dict[str, Any] = json.loads(resp.read())
            return data
    except OSError:
        return None


def start_worker(settings: Settings) -> tuple[subprocess.Popen[bytes] | None, int]:
    """A worker of our own (or None when one already answers on the web port), and its port."""
    port = settings.web_port
    if not _port_free(port):
        if _stats(port) is not None:
            print(f"using the worker already running on port {port}")
            return None, port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    log_path = REPO / ".xwait" / "demo-worker.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "XWAIT_WEB_PORT": str(port), "XWAIT_LOG_LEVEL": "warning",
           "XWAIT_DATA_DIR": str(REPO / ".xwait" / "demo-worker")}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own console script
            [str(Path(sys.executable).parent / "xwait"), "worker"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"starting a worker (log: {log_path.relative_to(REPO)}) ...", flush=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        stats = _stats(port)
        if stats is not None and stats["ownedPartitions"]:
            print(f"worker ready: owns partitions {stats['ownedPartitions']}\n")
            return proc, port
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = log_path.read_text(errors="replace").splitlines()[-20:]
    proc.kill()
    raise SystemExit("the worker did not become ready:\n" + "\n".join(tail))


def stop_worker(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def main() -> int:
    settings = from_env()
    stories = {
        "A": Story("A", "a reply is received",
                   lambda o: o.outcome == "RECEIVED" and o.reason == "reply_valid"),
        "B": Story("B", "reminded twice, then escalated",
                   lambda o: o.outcome == "ESCALATED" and o.reminders_sent == 2
                   and o.escalation_level == 1),
        "C": Story("C", "an invalid reply is reviewed and accepted",
                   lambda o: o.outcome == "RECEIVED" and o.review_outcome == "Accept"),
        "D": Story("D", "an early reply is correlated",
                   lambda o: o.outcome == "RECEIVED" and o.reason == "reply_valid"),
        "E": Story("E", "suspended and resumed with its remaining time",
                   lambda o: o.outcome == "ESCALATED"),
    }
    by_key = {s.key: s for s in stories.values()}
    worker, worker_port = start_worker(settings)
    t0 = time.monotonic()
    suspended_at: float | None = None
    resumed_at: float | None = None

    def say(story: Story, text: str) -> None:
        print(f"{time.monotonic() - t0:5.1f}s  {story.label}  {text}", flush=True)

    xw = XwaitClient(settings.with_overrides(console_url=f"http://127.0.0.1:{worker_port}"))
    outcomes = xw.subscribe("outcomes", from_beginning=True)
    actions = xw.subscribe("actions", from_beginning=True)
    try:
        a, b, c, d, e = (stories[x] for x in "ABCDE")
        say(d, "reply arrives before its request: held")
        # force: no wait has this key yet, which is the point of this story
        xw.reply(d.key, {"decision": "approved", "by": "sam"}, channel="portal", force=True)
        for story in (a, b, c, e):
            xw.start_wait(DEFINITION, correlation_key=story.key,
                          payload={"expense": f"demo {story.label}", "amount": 120})
            say(story, f"wait started: {story.title}")
        plan: list[tuple[float, str, Callable[[], object]]] = [
            (1.0, "A", lambda: xw.reply(a.key, {"decision": "approved", "by": "kim"},
                                        channel="portal")),
            (1.0, "C", lambda: xw.reply(c.key, {"decision": "maybe"}, channel="portal")),
            (2.0, "D", lambda: xw.start_wait(DEFINITION, correlation_key=d.key)),
            (2.0, "E", lambda: xw.suspend(e.key, "approver on holiday", operator="demo")),
            (8.0, "E", lambda: xw.resume(e.key, operator="demo")),
        ]
        texts = {("A", 1.0): "manager replies: approved",
                 ("C", 1.0): "manager replies with an invalid decision: 'maybe'",
                 ("D", 2.0): "the request arrives",
                 ("E", 2.0): "operator suspends it (6 s)",
                 ("E", 8.0): "operator resumes it"}
        while time.monotonic() - t0 < TIMEOUT_S and any(s.outcome is None
                                                         for s in stories.values()):
            now = time.monotonic() - t0
            for item in [p for p in plan if p[0] <= now]:
                plan.remove(item)
                at, label, act = item
                say(stories[label], texts[(label, at)])
                act()
                if label == "E":
                    suspended_at, resumed_at = ((now, resumed_at) if at == 2.0
                                                else (suspended_at, now))
            action = actions.poll(0.1)
            if isinstance(action, Action) and action.correlation_key in by_key:
                story = by_key[action.correlation_key]
                say(story, f"action {action.action}" + (
                    f" (level {action.level})" if action.level else "") + (
                    f" attempt {action.attempt}" if action.action == "SEND_REMINDER" else ""))
                if action.action == "REVIEW_NEEDED":
                    issue = (action.payload or {}).get("validationIssue", "")
                    say(story, f"review needed: {issue}")
                    xw.review(story.key, "Accept", "confirmed by phone", operator="demo")
                    say(story, "operator accepts it: 'confirmed by phone'")
            outcome = outcomes.poll(0.1)
            if isinstance(outcome, Outcome) and outcome.correlation_key in by_key:
                story = by_key[outcome.correlation_key]
                story.outcome = outcome
                say(story, f"OUTCOME {outcome.outcome} ({outcome.reason}), reminders "
                           f"{outcome.reminders_sent}, escalation level "
                           f"{outcome.escalation_level}")
    finally:
        outcomes.close()
        actions.close()
        xw.close()
        stop_worker(worker)

    print("\nsummary")
    ok = True
    for story in stories.values():
        good = story.outcome is not None and story.expect(story.outcome)
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {story.label}  {story.title}")
    e = stories["E"]
    if e.outcome is not None and suspended_at is not None and resumed_at is not None:
        paused = resumed_at - suspended_at
        print(f"       E was suspended {paused:.1f}s; it ended "
              f"{(e.outcome.ended_at - e.outcome.parked_at) / 1000:.1f}s after it parked, "
              f"of which {(e.outcome.ended_at - e.outcome.parked_at) / 1000 - paused:.1f}s "
              "counted (deadline 8 s + director 4 s)")
    print("\nsee them again: .venv/bin/xwait tail outcomes --from-beginning --timeout 5")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
