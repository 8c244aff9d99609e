"""scripts/registry's failures are clear, one line, non-zero (its success: the registry tests)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.harness import free_port
from tests.scripts import PATH, run, start_on_a_taken_port, status_and_stop


def test_status_and_stop_of_a_registry_never_started_say_so(tmp_path: Path) -> None:
    port = free_port()
    status, stop = status_and_stop("registry", port, {"PATH": PATH,
                                                      "XWAIT_REGISTRY_HOME": str(tmp_path)})
    assert status.returncode == 1
    assert f"registry not running on port {port}" in status.stdout
    assert stop.returncode == 0
    assert "no registry started by this script is running" in stop.stdout


def test_start_fails_in_one_line_when_the_port_is_taken(tmp_path: Path) -> None:
    port, result = start_on_a_taken_port("registry", {"PATH": PATH,
                                                      "XWAIT_REGISTRY_HOME": str(tmp_path)})
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"scripts/registry: error: port {port} on 127.0.0.1 is taken by another process; "
        "choose another with --port or XWAIT_REGISTRY_PORT"]


def test_start_without_an_assembled_registry_names_the_command_that_assembles_it(
    tmp_path: Path,
) -> None:
    """The tests' fixture starts it with --no-assemble: a fresh machine gets the command
    that builds it, in one line, not a silent six-minute Maven build inside a fixture."""
    env = {"PATH": PATH, "XWAIT_REGISTRY_HOME": str(tmp_path / "home"),
           "XWAIT_REGISTRY_APP_CACHE": str(tmp_path / "empty-cache")}
    result = run("registry", "start", "--port", str(free_port()), "--no-assemble", env=env)
    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert "the Schema Registry is not assembled yet: `make registry-app`" in result.stderr
    assert not (tmp_path / "empty-cache").exists(), "nothing was built"


# Stands in for Maven: the lines a real build prints (fetches, a plugin step), then the
# runner jar and its lib folder where the Quarkus build leaves them; each call counted.
FAKE_MVN = """#!/bin/sh
echo called >> "$FAKE_MVN_CALLS"
while [ "$1" != "-f" ]; do shift; done
target="$(dirname "$2")/target"
central=https://repo.maven.apache.org/maven2
echo "[INFO] Downloading from central: $central/a/a.jar"
echo "[INFO] Downloaded from central: $central/a/a.jar (2.5 MB at 9 MB/s)"
echo "[INFO] Downloaded from central: $central/b/b.pom (500 kB at 1 MB/s)"
echo "[INFO] --- quarkus-maven-plugin:2.16.4.Final:build (default) @ xwait-schema-registry ---"
mkdir -p "$target/lib"
echo jar > "$target/xwait-schema-registry-1-runner.jar"
echo lib > "$target/lib/a.jar"
"""


def test_prepare_assembles_the_registry_once_and_says_so(tmp_path: Path) -> None:
    """`make registry-app` (before `make test`'s suite): the first prepare says it builds
    from Maven Central and what it fetched; the next finds the cache and runs no Maven."""
    bin_dir, jdk = tmp_path / "bin", tmp_path / "jdk"
    for path, text in ((bin_dir / "mvn", FAKE_MVN), (jdk / "bin" / "java", "#!/bin/sh\nexit 1\n")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    calls, cache = tmp_path / "calls", tmp_path / "cache"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "JAVA_HOME": str(jdk),
           "XWAIT_REGISTRY_HOME": str(tmp_path / "home"), "XWAIT_REGISTRY_APP_CACHE": str(cache),
           "FAKE_MVN_CALLS": str(calls)}

    def prepare() -> str:
        done = run("registry", "prepare", env=env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    first = prepare().splitlines()
    assert first[0].startswith(
        f"assembling the Schema Registry (Apicurio) from Maven Central into {cache}/")
    assert "(2 files, 3 MB fetched from Maven Central)" in first[1]
    (app,) = cache.iterdir()
    assert (app / "xwait-schema-registry-1-runner.jar").is_file()

    second = prepare()
    assert "assembling" not in second
    assert calls.read_text().splitlines() == ["called"], "Maven ran once"
