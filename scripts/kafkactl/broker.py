"""One KRaft node (broker and controller): the single broker, or a node of a cluster."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kafkactl.layout import (
    CLUSTER_REPLICATION,
    CONTROLLER_OFFSET,
    DEFAULT_HOME,
    DEFAULT_SASL_USERS,
    LOG4J2,
    POM,
    SERVER_PROPERTIES,
    SINGLE_REPLICATION,
    WORKER_DATA,
    Fail,
    jars_folder,
    new_cluster_id,
    sasl_settings,
)
from kafkactl.ports import default_ports, ephemeral_ports, plan
from kafkactl.wire import metadata_ok, port_in_use, since, size, tail, wait_until_ready

if TYPE_CHECKING:
    from kafkactl.cluster import Cluster

# How long a start that lost its port to another checkout's broker launched in the same
# moment waits for that broker to answer before it reports its own failure.
RACED_START_S = 30.0


class Broker:
    """One KRaft node (broker and controller): the single node, or node i of a cluster."""

    def __init__(self, port: int, home: Path, sasl_port: int | None = None) -> None:
        self.port = port
        self.sasl_port = sasl_port
        self.home = home
        self.lib = jars_folder()
        self.folder = home  # where this node's files live
        self.data = home / f"data-{port}"
        self.config = home / f"server-{port}.properties"
        self.log4j = home / f"log4j2-{port}.xml"
        self.log = home / f"broker-{port}.log"
        self.stdout = home / f"broker-{port}.out"
        self.pidfile = home / f"broker-{port}.pid"
        self.node_id = 1
        # The single broker's controller port, resolved at a launch (`place_controller`);
        # a node's is its cluster's.
        self.controller_port = port + CONTROLLER_OFFSET
        self.voters = f"1@127.0.0.1:{self.controller_port}"
        self.record = home / f"broker-{port}.json"  # the controller port when it was chosen
        self.single = True
        self.replication = SINGLE_REPLICATION
        self.heap_default = "512m"
        self.cluster_id: str | None = None  # None: a fresh random id at the first format
        self.name = "kafka"
        self._started: float | None = None  # monotonic start of a launch; -1: reused
        self._proc: subprocess.Popen[bytes] | None = None
        self._marks: dict[Path, int] = {}  # where a launch's lines begin in its logs

    @classmethod
    def node(cls, cluster: Cluster, node_id: int) -> Broker:
        """Node `node_id` (1..N) of `cluster`: its files under the cluster's folder."""
        port = cluster.base + node_id - 1
        b = cls(port, cluster.home)
        b.folder = cluster.folder / f"node-{node_id}"
        b.data = b.folder / "data"
        b.config = b.folder / "server.properties"
        b.log4j = b.folder / "log4j2.xml"
        b.log = b.folder / "broker.log"
        b.stdout = b.folder / "broker.out"
        b.pidfile = b.folder / "broker.pid"
        b.node_id = node_id
        b.single = False
        b.controller_port = cluster.controller_port(node_id)
        b.voters = cluster.voters
        b.replication = CLUSTER_REPLICATION.format(nodes=cluster.nodes, rf=cluster.rf,
                                                   min_isr=cluster.min_isr)
        b.heap_default = "256m"
        b.cluster_id = cluster.cluster_id()
        b.name = f"kafka node {node_id}"
        return b

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -- process bookkeeping -------------------------------------------------
    def pid(self) -> int | None:
        """The pid of the broker this script started, if it still runs."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        # Only our own broker: a recycled pid must never be killed.
        if b"kafka.Kafka" in cmdline and str(self.config).encode() in cmdline:
            return pid
        return None

    # -- assembling the broker ---------------------------------------------
    def ensure_jars(self) -> None:
        # The folder is stamped with the pom's hash: a changed Kafka version
        # fetches again, an unchanged one never touches the network.
        stamp = hashlib.sha256(POM.read_bytes()).hexdigest()
        marker = self.lib / ".pom-sha256"
        if marker.exists() and marker.read_text().strip() == stamp:
            return
        # Two starts at once (brokers on two ports, a test run's processes) assemble one
        # folder: one does it, the other waits and finds it done.  Without the lock both
        # wrote lib.partial at once and Maven failed "Failed to copy full contents".
        self.lib.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lib.with_name(f"{self.lib.name}.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if marker.exists() and marker.read_text().strip() == stamp:
                return
            self._assemble(stamp)

    def _assemble(self, stamp: str) -> None:
        mvn = shutil.which("mvn")
        if not mvn:
            raise Fail("Maven (mvn) is not installed: it is needed once to fetch the broker jars")
        print(f"assembling the Kafka broker from Maven Central into {self.lib} (once)", flush=True)
        tmp = self.lib.with_name(f"{self.lib.name}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(  # noqa: S603 - fixed arguments
            [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise Fail(f"Maven could not fetch the broker jars (exit {proc.returncode})\n{tail}")
        (tmp / ".pom-sha256").write_text(stamp)
        shutil.rmtree(self.lib, ignore_errors=True)
        tmp.rename(self.lib)

    # -- the class-data archive (AppCDS) -------------------------------------
    def class_archive_options(self, java: str) -> list[str]:
        """Map the archive of the broker's classes, or have this JVM write it when it exits.

        The archive holds the classes of one class path for one JVM build:
        it is named by both (and the jars' folder is the shared one, so every
        checkout's path is the same).  A JVM whose archive does not match runs
        without it, as without any."""
        real = Path(os.path.realpath(java))
        st = real.stat()
        key = hashlib.sha256(f"{real}:{st.st_size}:{st.st_mtime_ns}:{self.classpath()}"
                             .encode()).hexdigest()[:12]
        archive = self.lib / f"classes-{key}.jsa"
        quiet = "-Xlog:cds*=off"  # classes it cannot archive are named, one line each
        if archive.exists():
            return [f"-XX:SharedArchiveFile={archive}", quiet]
        partial = self.lib / f"classes-{key}.jsa.{self.port}.partial"
        partial.unlink(missing_ok=True)
        return [f"-XX:ArchiveClassesAtExit={partial}", quiet]

    def keep_class_archive(self, clean_exit: bool) -> None:
        """After this node's JVM is gone: the archive it wrote at a clean exit becomes the
        one every start maps; a killed JVM's half-written one is dropped."""
        for partial in self.lib.glob(f"classes-*.jsa.{self.port}.partial"):
            archive = partial.with_name(partial.name.removesuffix(f".{self.port}.partial"))
            if clean_exit and partial.stat().st_size > 0 and not archive.exists():
                os.replace(partial, archive)
            else:
                partial.unlink(missing_ok=True)

    def java(self) -> str:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if not java or not Path(java).exists():
            raise Fail("Java is not installed (need Java 17 or newer): install a JDK or set "
                       "JAVA_HOME")
        out = subprocess.run(  # noqa: S603
            [java, "-version"], capture_output=True, text=True, check=False
        ).stderr
        try:
            version = out.split('"')[1]
            major = int(version.split(".")[0] if not version.startswith("1.") else "8")
        except (IndexError, ValueError):
            major = 0
        if major < 17:
            raise Fail(f"Kafka 4 needs Java 17 or newer; {java} is {out.splitlines()[:1]}")
        return java

    def classpath(self) -> str:
        return os.pathsep.join(str(p) for p in sorted(self.lib.glob("*.jar")))

    def write_config(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        sasl = self.sasl_port is not None
        self.config.write_text(SERVER_PROPERTIES.format(
            port=self.port, controller_port=self.controller_port, data=self.data,
            node_id=self.node_id, voters=self.voters, replication=self.replication,
            sasl_listener=f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}" if sasl else "",
            sasl_map=",SASL_PLAINTEXT:SASL_PLAINTEXT" if sasl else "",
            sasl_settings=sasl_settings(os.environ.get("XWAIT_KAFKA_SASL_USERS",
                                                       DEFAULT_SASL_USERS)) if sasl else ""))
        self.log4j.write_text(LOG4J2.format(log=self.log))

    def format_storage(self, java: str, archive: list[str]) -> None:
        """Format a new node's data folder (a JVM of its own, a second or so).

        It maps the broker's class archive when there is one (`archive`: the broker's
        options; one that would write the archive is left out, that is the broker's
        job), and runs on the JIT's first tier only, as a one-shot tool gains nothing
        from the optimising compiler: 1.7 CPU-seconds -> 0.8 a format, one per new
        broker or wiped node."""
        if (self.data / "meta.properties").exists():
            return
        cid = self.cluster_id or new_cluster_id()
        mapped = archive if any(o.startswith("-XX:SharedArchiveFile=") for o in archive) else []
        proc = subprocess.run(  # noqa: S603
            [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", *mapped, "-cp", self.classpath(),
             f"-Dlog4j2.configurationFile={self.log4j}",
             "kafka.tools.StorageTool", "format", "-t", cid, "-c", str(self.config),
             "--ignore-formatted"],
            capture_output=True, text=True, check=False,
        )
        if proc.returncode != 0:
            raise Fail(f"formatting the broker storage failed:\n{proc.stdout}{proc.stderr}",
                       show_log=True)

    def formatted_cluster_id(self) -> str | None:
        """The cluster id this node's storage was formatted with (None: not formatted)."""
        try:
            text = (self.data / "meta.properties").read_text()
        except OSError:
            return None
        found = re.search(r"^cluster\.id=(\S+)$", text, re.MULTILINE)
        return found.group(1) if found else None

    # -- lifecycle -----------------------------------------------------------
    def start(self, timeout: float) -> None:
        self.launch()
        self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process (unless it runs); `wait_ready` then waits for it to answer.

        Two steps, so that a cluster starts all its nodes before waiting for
        any: a KRaft node answers only once a majority of voters elected a
        controller."""
        self._started = None
        if self.pid() is not None:
            return
        if self.node_id == 1 and self.voters.count("@") == 1 and \
                port_in_use(self.port) and metadata_ok(self.port):
            # Another checkout's (or the user's own) broker: reuse it, and
            # leave stopping it to whoever started it.
            print(f"kafka already running on {self.bootstrap} (not started from "
                  f"{self.home}; reusing it): bootstrap {self.bootstrap}")
            self._started = -1.0
            return
        if self.single:
            self.place_controller()
        ports = [self.port, self.controller_port]
        if self.sasl_port is not None:
            ports.append(self.sasl_port)
        taken = [p for p in ports if port_in_use(p)]
        if taken:
            raise Fail(f"port {taken[0]} on 127.0.0.1 is taken by another process; "
                       f"choose another with --port or XWAIT_KAFKA_PORT")
        java = self.java()
        self.ensure_jars()
        archive = self.class_archive_options(java)
        self.write_config()
        self.format_storage(java, archive)
        heap = os.environ.get("XWAIT_KAFKA_HEAP", self.heap_default)
        cmd = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
               "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.log4j}",
               *archive, *os.environ.get("XWAIT_KAFKA_JAVA_OPTS", "").split(),
               "-cp", self.classpath(), "kafka.Kafka", str(self.config)]
        started = time.monotonic()
        # Where this start's lines begin in the logs (both are appended to): its bind error
        # comes before the configuration dump and the shutdown, more than 80 lines from
        # the end.
        self._marks = {path: size(path) for path in (self.stdout, self.log)}
        with open(self.stdout, "ab") as out:
            proc = subprocess.Popen(  # noqa: S603
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, cwd=self.home,
            )
        self.pidfile.write_text(str(proc.pid))
        self._proc = proc
        self._started = started

    def place_controller(self) -> None:
        """The single broker's controller port (`ports.plan`): port + 1000, or when that
        is no port outside the kernel's ephemeral range, one chosen and recorded."""
        try:
            recorded = [int(json.loads(self.record.read_text())["controllerPort"])]
        except (OSError, ValueError, KeyError, TypeError):
            recorded = None
        ephemeral = ephemeral_ports()
        got = plan([self.port], recorded, ephemeral, port_in_use, may_choose=True)
        assert got is not None  # noqa: S101 - a start may always choose
        [self.controller_port] = got
        self.voters = f"1@127.0.0.1:{self.controller_port}"
        if got != recorded and got != default_ports([self.port]):
            self.home.mkdir(parents=True, exist_ok=True)
            self.record.write_text(json.dumps({"controllerPort": self.controller_port}) + "\n")
            print(f"controller port {self.port + CONTROLLER_OFFSET} is not outside the kernel's "
                  f"ephemeral ports ({ephemeral.start}-{ephemeral.stop - 1}): the controller "
                  f"listens on 127.0.0.1:{self.controller_port} (recorded in {self.record})")

    def wait_ready(self, timeout: float, brokers: int = 1) -> None:
        """Return once this node answers a metadata request listing itself and at
        least `brokers` brokers in all."""
        if self._started == -1.0:
            return  # somebody else's broker, reused
        if self._started is None:  # it was running already
            wait_until_ready(self.port, timeout=timeout, node_id=self.node_id, brokers=brokers)
            print(f"{self.name} already running (pid {self.pid()}): bootstrap {self.bootstrap}")
            return
        proc = self._proc
        assert proc is not None  # noqa: S101 - set by launch()
        try:
            wait_until_ready(self.port, timeout=timeout, alive=lambda: proc.poll() is None,
                             node_id=self.node_id, brokers=brokers,
                             cluster=self.formatted_cluster_id())
        except Fail as exc:
            exited = proc.poll() is not None
            if not exited:
                proc.kill()
            self.pidfile.unlink(missing_ok=True)
            exc.logs = (self.stdout, self.log)
            if exited and self.single and any("Address already in use" in since(path, mark)
                                              for path, mark in self._marks.items()):
                # Another checkout launched a broker on this port in the same moment (two
                # fresh clones' `make test` side by side): it took the port (or the
                # controller's, both chose the same free one), and this one exited
                # "Address already in use".  Reuse it once it answers.
                try:
                    wait_until_ready(self.port, timeout=min(timeout, RACED_START_S))
                except Fail:
                    raise exc from None
                print(f"kafka already running on {self.bootstrap} (another checkout's, "
                      f"started in the same moment; reusing it): bootstrap {self.bootstrap}")
                self._started = -1.0
                return
            raise
        print(f"{self.name} started in {time.monotonic() - self._started:.1f}s "
              f"(pid {proc.pid}): bootstrap {self.bootstrap}"
              + (f", SASL_PLAINTEXT (PLAIN) on 127.0.0.1:{self.sasl_port}"
                 if self.sasl_port is not None else ""))

    def stop(self) -> None:
        pid = self.pid()
        if pid is None:
            print(f"no broker started by this script is running on port {self.port}")
            self.pidfile.unlink(missing_ok=True)
            return
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.2)
        clean = self.pid() is None
        if not clean:
            os.kill(pid, signal.SIGKILL)
        self.keep_class_archive(clean)
        self.pidfile.unlink(missing_ok=True)
        print(f"{self.name} stopped (pid {pid})")

    def kill(self) -> None:
        """kill -9: the node dies as in a crash (no controlled shutdown, no leader moved)."""
        pid = self.pid()
        if pid is None:
            print(f"no broker started by this script is running on port {self.port}")
            return
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.pid() is not None:
            time.sleep(0.05)
        self.keep_class_archive(False)
        self.pidfile.unlink(missing_ok=True)
        print(f"{self.name} killed (pid {pid})")

    def freeze(self, thaw: bool = False) -> None:
        """SIGSTOP (SIGCONT with `thaw`): a broker that stands still with its sockets open."""
        pid = self.pid()
        if pid is None:
            raise Fail(f"no broker started by this script is running on port {self.port}")
        os.kill(pid, signal.SIGCONT if thaw else signal.SIGSTOP)
        print(f"{self.name} {'thawed' if thaw else 'frozen'} (pid {pid})")

    def wipe(self) -> None:
        """Delete a stopped node's data, as a replaced disk would have it."""
        if self.pid() is not None:
            raise Fail(f"{self.name} is running (pid {self.pid()}): stop or kill it first")
        if self.data.exists():
            shutil.rmtree(self.data)
        print(f"removed {self.data}")

    def quorum_state(self) -> tuple[int, int] | None:
        """(leader epoch, leader id) of the metadata quorum as this node last wrote it."""
        try:
            state = json.loads((self.data / "__cluster_metadata-0" / "quorum-state").read_text())
            return int(state["leaderEpoch"]), int(state["leaderId"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def reset(self) -> None:
        """Stop the broker and drop every topic and offset it held.

        A broker that has served many test sessions holds thousands of
        partitions and starts (and rebalances) far more slowly.  The RocksDB
        folders of this checkout's workers (the demo's, and the default
        XWAIT_DATA_DIR) mirror changelog topics that are then gone, and faust
        refuses to start on them, so they go too."""
        self.stop()
        workers = WORKER_DATA if self.home.resolve() == DEFAULT_HOME.resolve() else ()
        for folder in (self.data, *workers):
            if folder.exists():
                shutil.rmtree(folder)
                print(f"removed {folder}")

    def status(self) -> int:
        pid = self.pid()
        if pid is None:
            print(f"kafka not running on port {self.port}")
            return 1
        ok = metadata_ok(self.port)
        print(f"kafka running (pid {pid}): bootstrap {self.bootstrap}, "
              f"{'answers metadata requests' if ok else 'NOT answering metadata requests'}")
        return 0 if ok else 1

    def logs(self, lines: int) -> None:
        print(tail(self.log, lines) or tail(self.stdout, lines))
