"""Every version of every definition, kept on Kafka (rule 13): what a worker does at start,
and what it learns while it runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from streams import topics
from streams.config import Settings
from streams.core import DefinitionError, DefinitionSet
from streams.definition_store import DefinitionStore, version_key
from streams.definitions import load_documents
from tests.waiting import until

pytestmark = [pytest.mark.kafka, pytest.mark.rule13]

V1 = "variant: single-channel\nchannels: [portal]\ndeadline: PT5M\n"
V2 = V1.replace("PT5M", "PT6M")


@contextmanager
def _following(store: DefinitionStore, kept: DefinitionSet) -> Iterator[None]:
    """The store following the definitions topic into `kept` for the block."""
    store.follow(kept)
    try:
        yield
    finally:
        store.stop()


def _folder(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "approval.yaml").write_text(text)
    return folder


@pytest.fixture
def made(settings: Settings) -> Settings:
    topics.create(settings, topics.load_specs(settings))
    return settings


def test_a_worker_publishes_what_the_topic_lacks_and_keeps_every_stored_version(
        made: Settings, tmp_path: Path) -> None:
    first = DefinitionStore(made).sync(load_documents(_folder(tmp_path, "one", V1)))
    v1 = first["approval"].version
    second = DefinitionStore(made).sync(load_documents(_folder(tmp_path, "two", V2)))
    v2 = second["approval"].version
    assert v1 != v2
    assert second.version("approval", v1) == dataclasses.replace(
        first["approval"], source=second.version("approval", v1).source)  # type: ignore[union-attr]
    stored = DefinitionStore(made).read_all()
    assert {version_key("approval", v1), version_key("approval", v2)} <= set(stored)
    again = DefinitionStore(made)
    again.sync(load_documents(_folder(tmp_path, "three", V1)))  # nothing new to publish
    assert len([k for k in again.read_all() if k.startswith(b"approval@")]) == 2


def test_an_explicit_version_reused_for_other_content_stops_the_worker(
        made: Settings, tmp_path: Path) -> None:
    DefinitionStore(made).sync(load_documents(_folder(tmp_path, "a", V1 + "version: '7'\n")))
    with pytest.raises(DefinitionError, match="give the changed definition a new version"):
        DefinitionStore(made).sync(load_documents(_folder(tmp_path, "b", V2 + "version: '7'\n")))


def test_a_running_worker_learns_versions_published_after_it_started(
        made: Settings, tmp_path: Path) -> None:
    store = DefinitionStore(made)
    kept = store.sync(load_documents(_folder(tmp_path, "one", V1)))
    with _following(store, kept):
        later = DefinitionStore(made).sync(load_documents(_folder(tmp_path, "two", V2)))
        v2 = later["approval"].version
        until(lambda: kept.version("approval", v2) is not None,
              "the follower to read the new version", timeout=20)


def test_a_decision_that_needs_a_version_not_yet_read_looks_for_it_once(
        made: Settings, tmp_path: Path) -> None:
    store = DefinitionStore(made)
    kept = store.sync(load_documents(_folder(tmp_path, "one", V1)))  # not following
    later = DefinitionStore(made).sync(load_documents(_folder(tmp_path, "two", V2)))
    v2 = later["approval"].version
    assert isinstance(kept, DefinitionSet)
    assert kept.version("approval", v2) is not None  # read from the topic on demand
    assert kept.version("approval", "nope") is None
    assert store.fetch("approval", "nope") is None  # asked again too soon: not read again


def test_removed_versions_are_tombstones_a_worker_with_the_file_publishes_again(
        made: Settings, tmp_path: Path) -> None:
    store = DefinitionStore(made)
    kept = store.sync(load_documents(_folder(tmp_path, "one", V1)))
    v1 = kept["approval"].version
    with _following(store, kept):
        DefinitionStore(made).remove("approval", [v1])
        until(lambda: DefinitionStore(made).read_all().get(version_key("approval", v1))
              is not None, "the worker to publish its file again", timeout=20, every=0.3)


def test_a_running_worker_forgets_a_version_removed_that_it_does_not_load(
        made: Settings, tmp_path: Path) -> None:
    store = DefinitionStore(made)
    kept = store.sync(load_documents(_folder(tmp_path, "one", V1)))
    v1 = kept["approval"].version
    v2 = DefinitionStore(made).sync(load_documents(_folder(tmp_path, "two", V2)))[
        "approval"].version
    with _following(store, kept):
        until(lambda: v2 in {d.version for d in kept.kept()},
              "the follower to read version 2", timeout=20)
        DefinitionStore(made).remove("approval", [v2])
        until(lambda: v2 not in {d.version for d in kept.kept()},
              "the removed version to be forgotten", timeout=20)
        assert [d.version for d in kept.kept()] == [v1]  # its own file's version stays
