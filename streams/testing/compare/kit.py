"""The bench kit's tools as processes: its load generator, pipes and peers, and the context
of one comparison.

The yardstick is the bench kit (``--kit``, by default ``../shared/bench-kit``
beside the repository), used as it is: ``loadgen.py`` drives and measures
every system from outside, ``rawpipe.py`` is the floor a Kafka client can
move, ``pypeer.py`` and ``kstreams/`` are the same rules in plain Python and
in Kafka Streams.  Beside them, ``bench/faustpipe.py`` (ours).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.config import REPO_ROOT
from streams.testing.compare.workloads import Workload, start_delay
from streams.testing.harness.host import versions
from streams.testing.harness.topology import make_topology

DEFAULT_KIT = REPO_ROOT.parent / "shared" / "bench-kit"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "xwait-bench"
FAUSTPIPE = REPO_ROOT / "bench" / "faustpipe.py"

# The storm's processor starts this long after loadgen launches it: every preloaded request was
# stamped before the launch, so all deadlines have passed when it starts, however fast it starts
# (a peer that joins its group within the 3 s would otherwise wait for the deadlines, and its
# escalations/s would measure the clock).  The delay is taken off the storm's seconds.
DELAYED_START = ("import os, sys, time; time.sleep(float(sys.argv[1])); "
                 "os.execvp(sys.argv[2], sys.argv[2:])")

class CompareError(Exception):
    """One run could not be measured; it is recorded with this message."""

@dataclass
class Context:
    args: argparse.Namespace
    kit: Path
    python: str
    topology: Path
    scratch: Path
    jar: Path | None
    failed_logs: Path  # where the logs of a failed run are copied (under --out-dir)
    notes: list[str] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return str(self.args.bootstrap)

    @property
    def partitions(self) -> int:
        count: int = self.args.partitions
        return count

    def waits(self, workload: Workload) -> int:
        rate: float = self.args.rate
        seconds: float = self.args.seconds
        waits: int = self.args.waits
        return max(1, round(rate * seconds)) if workload.mode == "open" else waits

@dataclass
class RunPlan:
    round: int
    position: int  # place of the system in this round's order, from 1
    workload: Workload
    system: str
    prefix: str
    folder: Path

def kit_files(kit: Path) -> None:
    missing = [n for n in ("loadgen.py", "rawpipe.py", "pypeer.py", "mktopics.py",
                           "waits/bench.yaml", "waits/bench-long.yaml") if not (kit / n).exists()]
    if missing:
        raise CompareError(f"the bench kit at {kit} lacks {', '.join(missing)}; "
                           "give its folder with --kit")

def kit_topology(folder: Path, kit: Path, names: tuple[str, ...] = ("bench.yaml",
                                                                     "bench-long.yaml")) -> Path:
    """The repository's topics.yaml and the kit's definitions, unchanged, in one folder."""
    make_topology(folder, [kit / "waits" / name for name in names])
    return folder

def build_kstreams(kit: Path, cache: Path, notes: list[str]) -> Path | None:
    """The Kafka Streams peer's jar, built once per kit version into `cache`; None to skip it.

    The kit may be read-only, and Maven writes ``target/`` beside ``pom.xml``: the sources are
    copied to ``cache/kstreams-<hash of the sources>`` and built there.
    """
    java, mvn = shutil.which("java"), shutil.which("mvn")
    if java is None or mvn is None:
        notes.append("kstreams skipped: " + " and ".join(
            n for n, found in (("java", java), ("mvn", mvn)) if found is None) + " not found")
        return None
    src = kit / "kstreams"
    files = sorted(p for p in src.rglob("*") if p.is_file() and "target" not in p.parts)
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(src)).encode() + b"\0" + p.read_bytes())
    dest = cache / f"kstreams-{digest.hexdigest()[:12]}"
    jar = dest / "target" / "wait-peer.jar"
    if jar.exists():
        return jar
    building = cache / f"building-{uuid.uuid4().hex[:8]}"
    shutil.copytree(src, building, ignore=shutil.ignore_patterns("target"))
    for p in [building, *building.rglob("*")]:  # the kit's files may be read-only
        p.chmod(p.stat().st_mode | 0o200)
    print(f"compare: building the Kafka Streams peer in {dest} (mvn -q package)", flush=True)
    try:
        done = subprocess.run([mvn, "-q", "package"],  # noqa: S603 - Maven on the kit's pom
                              cwd=building, capture_output=True,
                              text=True, timeout=1200, check=False)
    except subprocess.TimeoutExpired:
        notes.append("kstreams skipped: mvn package took more than 20 minutes")
        shutil.rmtree(building, ignore_errors=True)
        return None
    if done.returncode != 0 or not (building / "target" / "wait-peer.jar").exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        notes.append(f"kstreams skipped: mvn package failed: {' | '.join(tail)}")
        shutil.rmtree(building, ignore_errors=True)
        return None
    if dest.exists():  # another run built it meanwhile
        shutil.rmtree(building, ignore_errors=True)
    else:
        building.rename(dest)
    return jar

def tail(path: Path, lines: int = 30) -> list[str]:
    try:
        return path.read_bytes().decode(errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def reap(marker: str) -> list[int]:
    """Kill (by pid) what is left of a run: processes whose command or environment holds its
    unique prefix. Only needed when the load generator itself had to be killed."""
    killed = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            text = (d / "cmdline").read_bytes() + (d / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in text:
            with contextlib.suppress(OSError):
                os.kill(int(d.name), signal.SIGKILL)
                killed.append(int(d.name))
    return killed


def run_tool(argv: list[str], log: Path, timeout: float, marker: str) -> None:
    """Run one of the kit's scripts to its end; its output goes to `log`.

    On a timeout it gets SIGINT first (loadgen then stops the processor it started), then
    SIGKILL, and anything still carrying the run's prefix is killed.
    """
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out,  # noqa: S603 - the kit's own tools
                                stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        code = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        reap(marker)
        raise CompareError(f"{Path(argv[1]).name} took more than {timeout:.0f}s") from None
    if code != 0:
        raise CompareError(f"{Path(argv[1]).name} exited with {code}: "
                           + " | ".join(tail(log, 4)))


class Peer:
    """A peer process started here (open mode); loadgen starts it itself in drain mode."""

    def __init__(self, argv: list[str], log: Path) -> None:
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out,  # noqa: S603 - the kit's peer
                                         stderr=subprocess.STDOUT,
                                         start_new_session=True)
        self.log = log

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

def loadgen_argv(ctx: Context, plan: RunPlan, *, start_cmd: list[str] | None = None,
                 log: Path | None = None, pid: int | None = None,
                 preload_only: bool = False) -> list[str]:
    w = plan.workload
    if start_cmd is not None and start_delay(w):  # exec keeps the pid loadgen reads RSS of
        start_cmd = [ctx.python, "-c", DELAYED_START, f"{start_delay(w):g}", *start_cmd]
    argv = [ctx.python, str(ctx.kit / "loadgen.py"), "--bootstrap", ctx.bootstrap,
            "--prefix", plan.prefix, "--definition", w.definition, "--mode", w.mode,
            "--waits", str(ctx.waits(w)), "--mix", w.mix, "--deadline-s", f"{w.deadline_s:g}",
            "--schemas", str(REPO_ROOT / "schemas"), "--stall-s", f"{ctx.args.stall_s:g}",
            "--seed", str(ctx.args.seed), "--out", str(plan.folder / "loadgen.json")]
    if w.mode == "open":
        argv += ["--rate", f"{ctx.args.rate:g}"]
    if start_cmd is not None:
        argv += ["--start-cmd", shlex.join(start_cmd)]
    if log is not None:
        argv += ["--log", str(log)]
    if pid is not None:
        argv += ["--pid", str(pid)]
    if preload_only:
        argv += ["--preload-only"]
    return argv


def loadgen_timeout(ctx: Context, w: Workload) -> float:
    stall: float = ctx.args.stall_s
    if w.mode == "open":
        seconds: float = ctx.args.seconds
        return seconds + 300
    return max(300.0, ctx.waits(w) / 20 + 2 * stall)


def read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data
    except (OSError, ValueError) as exc:
        raise CompareError(f"no result in {path.name}: {exc}") from exc


def mktopics(ctx: Context, plan: RunPlan) -> None:
    run_tool([ctx.python, str(ctx.kit / "mktopics.py"), ctx.bootstrap, plan.prefix,
              str(ctx.partitions)], plan.folder / "mktopics.log", 120, plan.prefix)

def peer_argv(ctx: Context, plan: RunPlan) -> tuple[list[str], str]:
    """The peer's command line and its consumer group."""
    w = plan.workload
    if plan.system == "pypeer":
        group = f"{plan.prefix}-py"
        return ([ctx.python, str(ctx.kit / "pypeer.py"), "--bootstrap", ctx.bootstrap,
                 "--prefix", plan.prefix, "--group", group, "--deadline-s", f"{w.deadline_s:g}",
                 "--remind-s", f"{w.remind_s:g}"], group)
    if ctx.jar is None:
        raise CompareError("the Kafka Streams peer was not built")
    group = f"{plan.prefix}-ks"
    guarantee = {"default": [], "at_least_once": ["-Dguarantee=at_least_once"],
                 "exactly_once": ["-Dguarantee=exactly_once_v2"]}[ctx.args.guarantee]
    return (["java", f"-Ddeadline.ms={round(w.deadline_s * 1000)}",
             f"-Dremind.ms={round(w.remind_s * 1000)}", f"-Dapp.id={group}",
             f"-Dstate.dir={plan.folder / 'ks-state'}", *guarantee, "-jar", str(ctx.jar),
             ctx.bootstrap, plan.prefix], group)

def tool_version(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True,  # noqa: S603 - java/mvn -version
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = (done.stdout + done.stderr).strip().splitlines()
    return re.sub(r"\x1b\[[0-9;]*m", "", text[0]).strip() if text else None


def all_versions(kit: Path) -> dict[str, Any]:
    found = versions()
    java = tool_version(["java", "-version"]) if shutil.which("java") else None
    match = re.search(r'version "([^"]+)"', java or "")
    found["java"] = f"Java {match.group(1)}" if match else java
    found["maven"] = tool_version(["mvn", "-v"]) if shutil.which("mvn") else None
    with contextlib.suppress(OSError):
        pom = (kit / "kstreams" / "pom.xml").read_text(encoding="utf-8")
        match = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom)
        found["kafka_streams"] = match.group(1) if match else None
    return found

__all__ = ["DEFAULT_CACHE", "DEFAULT_KIT", "DELAYED_START", "FAUSTPIPE", "CompareError", "Context",
           "Peer", "RunPlan", "all_versions", "build_kstreams", "kit_files", "kit_topology",
           "loadgen_argv", "loadgen_timeout", "mktopics", "peer_argv", "read_json", "reap",
           "run_tool", "tail", "tool_version"]
