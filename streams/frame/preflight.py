"""What a worker asks the broker before faust starts, begun while faust is imported.

Before it takes a partition a worker creates the topics that are missing and
checks their partition counts (`topics.ensure`), refuses to share its group
with workers of an earlier version (`fleet.check`), and publishes and reads
the wait definitions (`DefinitionStore.sync`, rule 13 of docs/rules.md).
That is several broker round trips, each with a client of its own: ~0.3 s on
an idle broker.  Importing faust and the processor costs ~0.8 s of CPU,
during which the broker's answers can arrive: `xwait worker` begins this
in a thread first, so a restarted worker decides sooner (issue 51: start
to first decision within 2 s).  The thread imports nothing: an import
there would race the main thread's for the same modules.

Whatever the thread raises (a topic with the wrong partition count, an
earlier worker in the group, a definition changed under its version) is
raised again where the worker asks for the answer, as if it had been asked
there.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future

from streams import codec, topics
from streams.config import Settings
from streams.core import WaitDefinition
from streams.definition_store import DefinitionStore
from streams.definitions import load_documents
from streams.frame import fleet, versions

__all__ = ["begin"]


def begin(settings: Settings, definitions: Mapping[str, WaitDefinition] | None = None
          ) -> Future[Mapping[str, WaitDefinition]]:
    """Check what needs no broker here, then ask the broker in a thread.

    Without `definitions`, the files of the topology are the newest and every
    version the deployment's workers published is kept; the answer is that
    set, and a thread keeps following the definitions topic.  With them, the
    answer is `definitions` (nothing is published)."""
    versions.check()
    documents = load_documents(settings.topology / "waits") if definitions is None else []
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    codec.configure(settings)  # the Confluent wire format when a registry is set
    answer: Future[Mapping[str, WaitDefinition]] = Future()

    def ask() -> None:
        try:
            topics.ensure(settings)
            fleet.check(settings, topics.assignment_topic(settings))
            if definitions is None:
                store = DefinitionStore(settings)
                kept = store.sync(documents)
                store.follow(kept)
                answer.set_result(kept)
            else:
                answer.set_result(definitions)
        except BaseException as exc:  # noqa: BLE001 - raised again by answer.result()
            answer.set_exception(exc)

    # A daemon: a worker that fails to import must not wait on the broker to exit.
    threading.Thread(target=ask, name="xwait-preflight", daemon=True).start()
    return answer
