"""A wheel built from the checkout installs and runs outside it: definitions, start, worker, result.

Before: the wheel held no `.avsc` or `.yaml`, so an installed `xwait` found
neither schemas nor topology (the Dockerfile hid it with `pip install -e`).

The fresh virtualenv gets the wheel and nothing else from the checkout; its
third-party dependencies are borrowed from the development virtualenv through
a `.pth` line (installing faust, rocksdict & co. from PyPI again would add a
minute to every run). `streams` itself therefore resolves to the wheel's copy,
and every command runs with the working directory outside the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import free_port
from tests.prefixes import unique_prefix

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO),
                    "-w", str(out)], check=True, capture_output=True, cwd=out, timeout=300)
    [built] = out.glob("xwait-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"),
                    "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300,
                   capture_output=True)
    site = subprocess.run([str(home / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "xwait-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home


def test_the_wheel_carries_schemas_example_topology_console_page_and_py_typed(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in [*(REPO / "streams" / "schemas").rglob("*.avsc"),
                 *(REPO / "streams" / "topology").rglob("*.yaml"),
                 *(REPO / "streams" / "console" / "static" / "vendor" / "bpmn-js").iterdir(),
                 *(f for f in (REPO / "streams" / "console" / "static").iterdir() if f.is_file()),
                 REPO / "streams" / "py.typed"]:
        assert str(path.relative_to(REPO)) in names, f"{path.name} missing from the wheel"


def test_the_wheel_carries_the_native_record_path_and_it_loads(wheel: Path, venv: Path) -> None:
    natives = [n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("streams/_native")]
    assert len(natives) == 1 and natives[0].endswith(".so"), natives
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import streams._native as n; print(n.__file__)"],
                           check=True, capture_output=True, text=True, cwd=venv).stdout
    assert found.startswith(str(venv)), found  # the wheel's copy, not the checkout's


@pytest.fixture
def run(venv: Path, tmp_path: Path, kafka_bootstrap: str
        ) -> Iterator[tuple[dict[str, str], Path]]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "XWAIT_BOOTSTRAP": kafka_bootstrap, "XWAIT_TOPIC_PREFIX": unique_prefix("w"),
           "XWAIT_PARTITIONS": "2", "XWAIT_WEB_PORT": str(free_port())}
    env["XWAIT_CONSOLE_URL"] = f"http://127.0.0.1:{env['XWAIT_WEB_PORT']}"
    yield env, tmp_path


def _xwait(venv: Path, env: dict[str, str], cwd: Path, *args: str,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(venv / "bin" / "xwait"), *args], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=timeout, check=False)


def test_the_installed_wheel_runs_definitions_start_a_worker_and_result_outside_the_checkout(
    venv: Path, run: tuple[dict[str, str], Path],
) -> None:
    env, cwd = run
    where = _xwait(venv, env, cwd, "definitions", "--json")
    assert where.returncode == 0, where.stderr
    listed = json.loads(where.stdout)
    assert "site-packages" in listed["folder"] and str(REPO) not in listed["folder"]
    assert {d["name"] for d in listed["definitions"]} >= {"expense-approval", "demo-approval"}
    assert _xwait(venv, env, cwd, "topics", "create").returncode == 0

    with open(cwd / "worker.log", "wb") as log:
        worker = subprocess.Popen([str(venv / "bin" / "xwait"), "worker"], env=env, cwd=cwd,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        started = _xwait(venv, env, cwd, "start", "expense-approval", "--payload",
                         '{"amount": 120}')
        assert started.returncode == 0, started.stderr
        key = started.stdout.strip()
        deadline = time.monotonic() + 90
        while True:  # the reply is checked against the worker once it has parked the wait
            replied = _xwait(venv, env, cwd, "reply", key, "--channel", "portal", "--data",
                             '{"decision": "approved"}')
            if replied.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert replied.returncode == 0, replied.stderr
        result = _xwait(venv, env, cwd, "result", key, "--timeout", "90", "--json")
        assert result.returncode == 0, (result.stderr, (cwd / "worker.log").read_text()[-3000:])
        outcome = json.loads(result.stdout)
        assert (outcome["outcome"], outcome["reason"]) == ("RECEIVED", "reply_valid")
        assert outcome["responseData"] == {"decision": "approved"}
    finally:
        os.killpg(worker.pid, 15)
        worker.wait(30)
    assert (cwd / ".xwait" / "worker").is_dir(), "the worker's data is under the working dir"
