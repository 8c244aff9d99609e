"""Refusing to join a group of workers of an earlier version (a mixed fleet is unsafe).

Workers before 2026-12-03 kept their state in a faust table and subscribed
the group to the input topics and the changelog; this version subscribes it
to `<app id>-assignment` only.  faust's assignor co-partitions each set of
topics on its own, so a mixed group would give the same waits partition to
an old and a new worker at once, and both would decide its inputs.  A
worker starting finds such members through the group's description (the
partitions each member is assigned) and stops with what to do instead;
a running worker looks again after every rebalance, since an earlier worker
may join later (an old pod restarted in the middle of a rollout, a rollback):
in one such run, 20 s of an old worker beside two new ones gave 1,083
duplicate outcomes.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from streams.config import Settings
from streams.errors import ConfigError

log = logging.getLogger(__name__)

DESCRIBE_TIMEOUT_S = 10.0
# Between two looks at a group that holds workers of an earlier version (`check`).
LOOK_AGAIN_S = 1.0


def foreign_members(settings: Settings, assignment_topic: str) -> dict[str, list[str]]:
    """Members of the workers' group assigned any topic but the assignment topic (and
    faust's own leader topic): client id -> the topics it holds."""
    admin = AdminClient(settings.confluent())
    group = settings.app_id
    try:
        described = admin.describe_consumer_groups(
            [group], request_timeout=DESCRIBE_TIMEOUT_S)[group].result(
            timeout=DESCRIBE_TIMEOUT_S + 1)
    except (KafkaException, TimeoutError) as exc:
        # A broker too busy to answer (a start at load 23 waited 10 s for nothing and
        # ended in a traceback): start, and look again after the first rebalance.
        log.warning("group %s not described within %.0f s (%s): not checked for workers "
                    "of an earlier version until the next rebalance", group,
                    DESCRIBE_TIMEOUT_S, str(exc) or "no answer")
        return {}
    leader = f"{group}-__assignor-__leader"
    found: dict[str, list[str]] = {}
    for member in described.members:
        assigned = member.assignment.topic_partitions if member.assignment else []
        topics = sorted({tp.topic for tp in assigned} - {assignment_topic, leader})
        if topics:
            found[f"{member.client_id} ({member.host})"] = topics
    return found


def refusal(settings: Settings, found: dict[str, list[str]]) -> ConfigError:
    """The one-line error naming the earlier workers found and what to do."""
    who = "; ".join(f"{member} holds {', '.join(topics)}" for member, topics in found.items())
    return ConfigError(
        f"Expected only workers of this version in group {settings.app_id!r}, but "
        f"workers of an earlier version are running ({who}): stop every worker of the "
        "earlier version first, then start this one (CHANGELOG.md, Upgrading)")


def check(settings: Settings, assignment_topic: str) -> None:
    """Raise `ConfigError` (one line) if workers of an earlier version are in the group.

    A worker stopped without leaving the group (killed, or stopped by a second
    signal) stays a member until its session times out: a fleet of the earlier
    release stopped and this one started at once was refused for a worker no
    longer running.  So members found are looked for again, each `LOOK_AGAIN_S`,
    for one session timeout (`XWAIT_SESSION_TIMEOUT`, the same for both
    releases unless set otherwise), and only those still there are refused.
    """
    found = foreign_members(settings, assignment_topic)
    deadline = time.monotonic() + settings.session_timeout + LOOK_AGAIN_S
    if found:
        log.info("workers of an earlier version in group %s (%s): waiting up to %.0f s "
                 "for them to leave it (a stopped worker's session times out)",
                 settings.app_id, ", ".join(found), settings.session_timeout + LOOK_AGAIN_S)
    while found and time.monotonic() < deadline:
        time.sleep(LOOK_AGAIN_S)
        found = foreign_members(settings, assignment_topic)
    if found:
        raise refusal(settings, found)


__all__ = ["check", "foreign_members", "refusal"]
