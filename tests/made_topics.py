"""Topics a test creates itself, ready to use when the call returns.

CreateTopics answers before the broker's metadata lists the topic with a
leader for each partition; a client that asks right away is told the topic
does not exist (seen on a busy machine, never alone).  So every test that
creates a topic directly goes through `create_topics`, which waits for that
condition (`streams.topics.wait_visible`), never for a fixed time.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from streams import topics


def create_topics(bootstrap: str, *new: NewTopic) -> None:
    """Create `new` and return once the broker lists each one, every partition with a leader."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(new)).values():
        future.result(timeout=30)
    topics.wait_visible(admin, [t.topic for t in new])
