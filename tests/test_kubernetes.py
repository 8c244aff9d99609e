"""deploy/kubernetes/ is valid Kubernetes and wires the worker the way the docs say, and
so is its overlay deploy/kubernetes-overlays/own-definitions/ (definitions from a ConfigMap).

Validated offline against the official OpenAPI schemas that the pinned
`kubernetes-validate` package ships (strict: an unknown field is an error).

The overlay is rendered by `render`, a small kustomize of exactly what the overlay uses
(resources, one configMapGenerator of files with labels, strategic-merge patches of lists
keyed by name or mountPath, the generated name's hash and its references from pod
volumes), so that it is checked wherever the suite runs; where `kubectl` is installed
(its built-in kustomize), the test compares the two renderings, object by object.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from streams import topics
from streams.cli.supervisor import STOP_WAIT_S
from streams.config import from_env
from streams.definitions import load_documents

REPO = Path(__file__).resolve().parent.parent
FOLDER = REPO / "deploy" / "kubernetes"
# Not under deploy/kubernetes/: kustomize refuses an overlay inside its base's folder
# ("cycle detected: candidate root ... contains visited root").
OVERLAY = REPO / "deploy" / "kubernetes-overlays" / "own-definitions"
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
    from streams.processor.tuning import TUNING

    stop_commit_wait_s = TUNING.stop_commit_wait_s

    pod = _manifests()["StatefulSet"]["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    pre_stop = worker["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    grace = pod["terminationGracePeriodSeconds"]
    assert grace >= int(pre_stop[1]) + stop_commit_wait_s + 10
    assert STOP_WAIT_S > stop_commit_wait_s, "the supervisor outwaits its workers too"


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


# -- the overlay: your own definitions from a ConfigMap ----------------------------------

Doc = dict[str, Any]
# Strategic merge: the lists the overlay's patch merges, by their Kubernetes merge key.
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name",
              "env": "name", "volumeMounts": "mountPath"}


def kustomize_hash(data: dict[str, str]) -> str:
    """kustomize's name suffix for a generated ConfigMap (api/hasher, `encodeConfigMap`):
    the SHA-256 of the JSON of its kind, name and data as Go encodes it (sorted keys, HTML
    characters escaped), its first 10 hex digits with 0, 1, 3, a and e swapped for g, h,
    k, m, t.  The name is empty: kustomize 5 looks up "metadata/name" as one field name,
    finds none, and hashes "" (so the suffix depends on the data alone)."""
    text = json.dumps({"data": data, "kind": "ConfigMap", "name": ""}, sort_keys=True,
                      separators=(",", ":"), ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return hashlib.sha256(text.encode()).hexdigest()[:10].translate(
        str.maketrans("013ae", "ghkmt"))


def _merge(base: Any, patch: Any, field: str = "") -> Any:
    """A strategic merge patch, as kustomize applies it: maps merge; a keyed list merges
    its items by key, the patch's first (kustomize's order); any other value is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        return {**base, **{k: _merge(base.get(k), v, k) for k, v in patch.items()}}
    if field in MERGE_KEYS and isinstance(base, list) and isinstance(patch, list):
        key = MERGE_KEYS[field]
        old = {item[key]: item for item in base}
        return ([_merge(old.get(item[key]), item) for item in patch]
                + [item for item in base if item[key] not in {i[key] for i in patch}])
    return patch


def _pod(doc: Doc) -> Doc:
    return doc.get("spec", {}).get("template", {}).get("spec", {})  # type: ignore[no-any-return]


def render(folder: Path) -> list[Doc]:
    """The kustomization in `folder`, built as kustomize builds it (what it uses only)."""
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert set(k) <= {"apiVersion", "kind", "resources", "configMapGenerator", "patches"}, \
        "render() knows only what the overlay uses: teach it the new field, or use kubectl"
    docs: list[Doc] = []
    for resource in k.get("resources", []):
        path = (folder / resource).resolve()
        docs += render(path) if path.is_dir() else list(yaml.safe_load_all(path.read_text()))
    renamed = {}
    for gen in k.get("configMapGenerator", []):
        assert set(gen) <= {"name", "files", "options"} and set(gen.get("options", {})) <= {
            "labels"}
        data = {Path(f).name: (folder / f).read_text() for f in gen["files"]}
        renamed[gen["name"]] = name = f"{gen['name']}-{kustomize_hash(data)}"
        meta = {"name": name, **({"labels": gen["options"]["labels"]}
                                 if "labels" in gen.get("options", {}) else {})}
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data})
    for entry in k.get("patches", []):
        assert set(entry) == {"path"}
        patch = yaml.safe_load((folder / entry["path"]).read_text())
        (i,) = [i for i, d in enumerate(docs) if d["kind"] == patch["kind"]
                and d["metadata"]["name"] == patch["metadata"]["name"]]
        docs[i] = _merge(docs[i], patch)
    for doc in docs:  # the generated names, where pods refer to them
        for volume in _pod(doc).get("volumes", []):
            if "configMap" in volume:
                volume["configMap"]["name"] = renamed.get(volume["configMap"]["name"],
                                                          volume["configMap"]["name"])
    return docs


def _by_kind(docs: list[Doc]) -> dict[str, Doc]:
    found = {}
    for doc in docs:
        generated = doc["kind"] == "ConfigMap" and "data" in doc and any(
            k.endswith(".yaml") for k in doc["data"])
        found["ConfigMap definitions" if generated else doc["kind"]] = doc
    return found


@pytest.fixture(scope="module")
def overlay() -> list[Doc]:
    return render(OVERLAY)


def test_the_overlay_renders_as_kubectl_kustomize_renders_it(overlay: list[Doc]) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("no kubectl: the overlay is checked as render() builds it, not compared")
    built = subprocess.run([kubectl, "kustomize", str(OVERLAY)], capture_output=True,
                           text=True, timeout=60, check=False)
    assert built.returncode == 0, built.stderr
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(overlay, key=key) == sorted(yaml.safe_load_all(built.stdout), key=key)


@pytest.mark.parametrize("version", [KUBERNETES, kubernetes_validate.latest_version()])
def test_the_rendered_overlay_is_valid_against_the_official_schemas(
        overlay: list[Doc], version: str) -> None:
    assert {d["kind"] for d in overlay} == {"ConfigMap", "Service", "StatefulSet",
                                           "PodDisruptionBudget", "Job"}
    for doc in overlay:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_overlay_lists_every_definition_of_its_folder() -> None:
    """kustomize takes files, not folders: a definition left out of the list is not
    deployed, silently."""
    k = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    (gen,) = k["configMapGenerator"]
    assert sorted(gen["files"]) == sorted(
        str(p.relative_to(OVERLAY)) for p in (OVERLAY / "waits").glob("*.yaml"))


def _volume_dir(volume: Doc, configmaps: dict[str, Doc], where: Path) -> Path:
    """A volume's folder as the kubelet fills it: a ConfigMap's keys are links into a
    hidden, timestamped folder (``..data`` -> ``..2026_...``), as an update swaps them."""
    where.mkdir(parents=True)
    if "configMap" in volume:
        stamp = where / "..2026_12_06_06_00_00.000000001"
        stamp.mkdir()
        (where / "..data").symlink_to(stamp.name)
        for key, text in configmaps[volume["configMap"]["name"]]["data"].items():
            (stamp / key).write_text(text)
            (where / key).symlink_to(f"..data/{key}")
    else:
        assert volume.keys() == {"name", "emptyDir"}
    return where


def _mount(root: Path, container: Doc, volumes: dict[str, Path]) -> None:
    """The container's mounts under `root`, parents first (a mount inside another volume
    is made inside that volume's folder, as the container runtime does)."""
    for m in sorted(container["volumeMounts"], key=lambda m: m["mountPath"].count("/")):
        if m["name"] in volumes:
            target = root / m["mountPath"].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(volumes[m["name"]], target_is_directory=True)


def test_the_overlay_mounts_its_definitions_where_the_worker_reads_them(
        overlay: list[Doc], tmp_path: Path) -> None:
    """The pod's files, laid out as the kubelet and the init container leave them, read
    by the worker's own code (`build_app`: `load_documents(settings.topology / "waits")`
    and `topics.ensure`'s `load_specs(settings)`)."""
    m = _by_kind(overlay)
    sts, generated = m["StatefulSet"], m["ConfigMap definitions"]
    pod = _pod(sts)
    (worker,) = pod["containers"]
    (init,) = pod["initContainers"]
    assert init["image"] == worker["image"], "topics.yaml of the workers' own release"
    configmaps = {d["metadata"]["name"]: d for d in overlay if d["kind"] == "ConfigMap"}
    volumes = {v["name"]: _volume_dir(v, configmaps, tmp_path / "volumes" / v["name"])
               for v in pod["volumes"]}
    # The init container, in a root of its own, then the worker's.
    _mount(tmp_path / "init", init, volumes)
    command, argument = init["command"][:-1], init["command"][-1]
    assert command[:2] == ["python", "-c"]
    subprocess.run([sys.executable, "-c", command[2],
                    str(tmp_path / "init" / argument.lstrip("/"))], check=True, timeout=60)
    root = tmp_path / "worker"
    _mount(root, worker, volumes)
    env = {e["name"]: e["value"] for e in worker["env"] if "value" in e}
    settings = from_env({"XWAIT_TOPOLOGY": str(root / env["XWAIT_TOPOLOGY"].lstrip("/"))})

    names = [d.name for d, _ in load_documents(settings.topology / "waits")]
    assert names == sorted(yaml.safe_load(text)["name"] for text in generated["data"].values())
    assert sorted(names) == ["invoice-approval", "supplier-onboarding"]
    shipped = [s.name for s in topics.load_specs(from_env({}))]
    assert [s.name for s in topics.load_specs(settings)] == shipped
    # The ConfigMap's name is the generated one, hash and all: a new definition, a new
    # name, a rolling update.
    (definitions,) = [v for v in pod["volumes"] if "configMap" in v]
    assert definitions["configMap"]["name"] == generated["metadata"]["name"]
    assert re.fullmatch(r"xwait-definitions-[0-9a-z]{10}", generated["metadata"]["name"])


def test_the_overlay_leaves_the_topics_job_on_the_image_s_topology(overlay: list[Doc]) -> None:
    """`xwait topics create` reads topics.yaml only: the image's, the same file."""
    job = _by_kind(overlay)["Job"]
    (container,) = _pod(job)["containers"]
    assert "XWAIT_TOPOLOGY" not in {e["name"] for e in container.get("env", [])}
    assert "XWAIT_TOPOLOGY" not in _by_kind(overlay)["ConfigMap"]["data"]
