"""Records the corpus of transitions the native rules are held equal on.

Run: ``.venv/bin/python scripts/record_transitions.py [--e2e FILE ...] [--no-e2e]``
(the end-to-end scenarios need the broker at 127.0.0.1:9092: ``make kafka``).

Three recordings, each of the Python rules deciding (`tests.core.transitions`):

1. the core suite and its hypothesis properties (``pytest tests/core``, its
   ``[python]`` runs, recorded by tests/core/conftest.py);
2. the processor's record streams (tests/processor/native_streams.py: every
   shipped definition, hostile input, timers fired when due), in this process;
3. end-to-end scenarios on the real broker (``pytest tests/e2e/...``), their
   workers recording through tests/core/recorder/sitecustomize.py.

Then the transitions are told apart by what they do (`_signature`: the input,
the wait's variant and status before and after, the kinds of effects), and at
most ``--per-kind`` of each kind are kept, so that rare paths stay and the
common ones do not fill the file (the end-to-end ones are kept whole); the
corpus is written to tests/core/corpus/transitions.jsonl.gz.  Record it again
when the rules gain a path the corpus does not take (docs/concepts/native.md).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from streams.core import Command, WaitDefinition, decode_slot  # noqa: E402 - after the path
from streams.core.definition import definition_for  # noqa: E402
from streams.core.rules import catch_up, decide  # noqa: E402
from tests.core.transitions import (  # noqa: E402
    CORPUS,
    RECORD_ENV,
    Recorder,
    Transition,
    definitions_document,
    read_definitions,
    read_event,
    recording_decide,
)

E2E = ["tests/e2e/test_rules.py", "tests/e2e/test_variants.py",
       "tests/e2e/test_results_and_keys.py", "tests/e2e/test_send_failures.py",
       "tests/e2e/test_versions.py", "tests/e2e/test_bulk.py"]
"""The scenarios recorded by default: every rule, every variant, results, send failures,
versions and bulk operations, on the real broker."""
KEPT_WHOLE = {"e2e"}
"""Sources whose every distinct transition is kept: the scenarios on the real broker are
few (a few hundred) and the closest to production."""


def record_core(folder: Path) -> None:
    env = {**os.environ, RECORD_ENV: str(folder)}
    subprocess.run([sys.executable, "-m", "pytest", "tests/core", "-q", "-p", "no:cacheprovider",  # noqa: S603
                    "-k", "python", "-x", "--no-header"], cwd=REPO, env=env, check=True)


def record_streams(folder: Path, seeds: int) -> None:
    from streams.processor import records
    from streams.processor.model import InputRecord
    from tests.processor.native_streams import PARTITIONS, Driver, definitions

    recorder = Recorder(folder, "streams")
    original = getattr(records, "decide")  # noqa: B009 - the name the handler calls
    setattr(records, "decide", recording_decide(original, recorder))  # noqa: B010
    try:
        for seed in range(seeds):
            handler = records.RecordHandler(definitions(), PARTITIONS,  # type: ignore[arg-type]
                                            "t.timers", pure_python=True)
            rows: dict[bytes, bytes] = {}

            def one(item: Any, now: int, handler: Any = handler,
                    rows: dict[bytes, bytes] = rows) -> Any:
                def load(key: str) -> bytes | None:
                    return rows.get(key.encode())
                if isinstance(item, InputRecord):
                    return handler.handle(item, load, now)
                return handler.fire(item, load, now, now)

            driver = Driver(seed, one)
            driver.rows = rows  # the driver keeps the rows the handler reads
            for _ in driver.items(1500):
                pass
    finally:
        setattr(records, "decide", original)  # noqa: B010


def record_e2e(folder: Path, files: list[str]) -> None:
    env = {**os.environ, RECORD_ENV: str(folder), "XWAIT_PURE_PYTHON": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "core" / "recorder"),
                                          str(REPO)])}
    subprocess.run([sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider",  # noqa: S603
                    "-n", "2", "--no-header"], cwd=REPO, env=env, check=False)


def _signature(t: Transition) -> tuple[Any, ...]:
    """What a transition does, coarsely: the corpus keeps a few of each."""
    wait = t.slot.wait if t.slot is not None else None
    name = wait.definition if wait is not None else getattr(t.event, "definition", None)
    version = wait.definition_version if wait is not None else None
    d: WaitDefinition | None = (definition_for(t.definitions, name, version)
                                if name is not None else None)
    try:
        decision = (catch_up(t.slot, t.now, t.definitions) if t.event is None
                    else decide(t.slot, t.event, t.now, t.definitions))
    except Exception as exc:  # refused: one kind of its own
        return (t.source.split(":")[0], "raised", type(exc).__name__)
    after = decision.slot.wait if decision.slot is not None else None
    effects = sorted({type(e).__name__ + ":" + str(getattr(e, "reason", "")
                                                   or getattr(e, "action", "")
                                                   or getattr(e, "kind", ""))
                      for e in decision.effects})
    detail = (t.event.command.value if isinstance(t.event, Command)
              else getattr(getattr(t.event, "kind", None), "value", None))
    return (t.source.split(":")[0], t.op, type(t.event).__name__, detail,
            d.variant.value if d is not None else None,
            wait.status.value if wait is not None else None,
            after.status.value if after is not None else None,
            bool(t.slot and (t.slot.early_replies or t.slot.early_commands)),
            tuple(effects))


def _read_raw(folder: Path) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    defs: dict[str, dict[str, Any]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("transitions-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            if "op" not in doc:
                defs[doc["defs"]] = doc
                continue
            key = json.dumps([doc["op"], doc["defs"], doc["slot"], doc["event"], doc["now"]])
            entries.setdefault(key, doc)  # the same transition, recorded twice: once
    return defs, list(entries.values())


def write_corpus(folder: Path, out: Path, per_kind: int, seed: int) -> dict[str, int]:
    defs, raw = _read_raw(folder)
    rng = random.Random(seed)  # noqa: S311 - a reproducible sample
    rng.shuffle(raw)
    read = {name: read_definitions(doc) for name, doc in defs.items()}
    kept: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for doc in raw:
        t = Transition(doc["op"], read[doc["defs"]],
                       None if doc["slot"] is None else decode_slot(doc["slot"].encode()),
                       None if doc["event"] is None else read_event(doc["event"]),
                       doc["now"], doc["source"])
        bucket = kept[_signature(t)]
        if len(bucket) < per_kind or t.source in KEPT_WHOLE:
            bucket.append(doc)
    chosen = sorted((d for bucket in kept.values() for d in bucket),
                    key=lambda d: (d["source"], d["defs"], d["now"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    counts: dict[str, int] = defaultdict(int)
    with gzip.open(out, "wt", encoding="utf-8", compresslevel=9) as corpus:
        for doc in chosen:
            if doc["defs"] not in written:
                document = definitions_document(read[doc["defs"]])
                if document["defs"] != doc["defs"]:
                    raise RuntimeError(f"definitions {doc['defs']} read back as another")
                corpus.write(json.dumps(document) + "\n")
                written.add(doc["defs"])
            corpus.write(json.dumps(doc) + "\n")
            counts[doc["source"].split(":")[0]] += 1
    print(f"{len(raw)} distinct transitions recorded, {len(kept)} kinds, "
          f"{len(chosen)} kept: {dict(counts)}; {out} {out.stat().st_size:,} bytes")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--e2e", nargs="*", default=E2E, help="end-to-end test files")
    parser.add_argument("--no-e2e", action="store_true", help="record no e2e scenario")
    parser.add_argument("--seeds", type=int, default=8, help="record streams played")
    parser.add_argument("--per-kind", type=int, default=4, help="transitions kept a kind")
    parser.add_argument("--seed", type=int, default=0, help="of the sample")
    parser.add_argument("--folder", type=Path, help="keep the raw recording here")
    parser.add_argument("--out", type=Path, default=CORPUS)
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="xwait-transitions-"))
    folder.mkdir(parents=True, exist_ok=True)
    record_core(folder)
    record_streams(folder, args.seeds)
    if not args.no_e2e:
        record_e2e(folder, args.e2e)
    write_corpus(folder, args.out, args.per_kind, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
