"""Workers bind one address and tell their peers another.

The console forwards a request for a key to the worker that owns it, at the
URL that worker published in the group.  Binding 0.0.0.0 (every interface,
as in a container) must not publish 0.0.0.0, which no peer can connect to.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from yarl import URL

from streams.cli import build_parser, settings_from
from streams.config import Settings, from_env
from streams.definitions import load_definitions
from streams.frame.app import build
from streams.processor.worker import Worker


def _worker(settings: Settings) -> Worker:
    worker = Worker(settings, load_definitions(settings.topology / "waits"))
    build(worker)
    return worker


@pytest.mark.parametrize(("bind", "advertised", "published"), [
    ("127.0.0.1", None, "127.0.0.1"),
    ("0.0.0.0", None, socket.gethostname()),  # noqa: S104 - a bind address under test
    ("0.0.0.0", "worker-3.internal", "worker-3.internal"),  # noqa: S104
    ("::1", None, "[::1]"),
    ("0.0.0.0", "fd00::7", "[fd00::7]"),  # noqa: S104
])
def test_the_published_url_is_one_a_peer_can_reach(
    tmp_path: Path, bind: str, advertised: str | None, published: str
) -> None:
    settings = Settings(web_host=bind, web_advertised_host=advertised, web_port=7123,
                        data_dir=tmp_path)
    conf = _worker(settings).app.conf
    assert conf.web_bind == bind
    assert URL(str(conf.canonical_url)) == URL(f"http://{published}:7123")


def test_the_advertised_host_comes_from_the_environment_or_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {"XWAIT_WEB_HOST": "0.0.0.0", "XWAIT_WEB_ADVERTISED_HOST": "10.0.0.7"}  # noqa: S104
    assert from_env(env).advertised_host == "10.0.0.7"
    monkeypatch.setenv("XWAIT_WEB_ADVERTISED_HOST", "10.0.0.7")
    args = build_parser().parse_args(["worker", "--web-advertised-host", "xwait-1"])
    assert settings_from(args).advertised_host == "xwait-1"
