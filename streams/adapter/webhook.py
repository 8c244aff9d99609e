"""``xwait adapter webhook``: POST each action to a URL, report what became of it.

One loop, at least once (the order is the commit protocol):

1. take a batch of actions from ``<prefix>.actions`` (a consumer group of its
   own; a group's first run starts at the actions written after it started,
   or at the oldest with ``--from-beginning``, and commits that start at once);
2. POST every routed action of the batch, ``concurrency`` at a time, each
   with the timeout; an answer that may come out otherwise next time is POSTed
   again by the adapter itself (`RetryPolicy`), after the wait it names in
   ``Retry-After`` or a doubling backoff, at most ``max_retry_wait`` each;
3. produce a result for each SEND_REQUEST, SEND_REMINDER and RUN_ESCALATION
   as soon as its POSTs are done and wait for Kafka to acknowledge them all:
   a 2xx answer is delivered; any other 4xx than 408, 425 and 429 failed for
   good (``permanent``: sending it again cannot help); 408, 425, 429, a 5xx,
   a timeout or no connection, still so after the adapter's own retries,
   failed (sent again by the definition's ``on_send_failure``);
4. commit the batch's offsets.

A crash before 4 POSTs the batch again, and so does a stop (SIGTERM) that
cuts a wait before a retry short (that batch's offsets are not committed; no
result is reported for the action cut short).  The receiver drops repeats by
the ``Idempotency-Key`` header: the action's ``idempotencyKey``, the same for
every POST of one action, the adapter's retries, xwait's send retries
(``sendAttempt`` 2, 3, ...) and a run after a restart alike, because it comes
from the record.  ``X-Xwait-Action-Id`` is the send attempt's own ``actionId``,
the one its result is reported under.  Results that Kafka does not
acknowledge are reported again, a second later and then less often (up to
every 30 s), until it does, and only then is the batch committed; a stop
meanwhile commits nothing, so the next run POSTs the batch again.

Which URL: the first route whose ``definition``, ``action`` and ``party``
(each a name or a list; omitted: any) match the action.  Its ``url`` is a
template of the action's fields (``{correlationKey}``, ``{waitKey}``,
``{actionId}``, ``{idempotencyKey}``, ``{definition}``, ``{action}``,
``{party}``, ``{level}``, ``{attempt}``, ``{sendAttempt}``, ``{tenant}``;
URL-quoted).  An action no route matches is left to other adapters (counted
``unrouted``, committed).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import string
import threading
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from streams import codec
from streams.adapter.sending import (
    DEFAULT_MAX_RETRY_WAIT_S,
    DEFAULT_RETRIES,
    Delivery,
    RetryPolicy,
    Sender,
)
from streams.client import Action, DeliveryFailed, XwaitClient
from streams.client._kafka import build, known_topics
from streams.codec import RecordType, UndecodableRecord
from streams.config import Settings
from streams.core.durations import parse_duration_ms
from streams.errors import ClientError, ConfigError, KafkaUnavailable
from streams.polling import available

log = logging.getLogger(__name__)

REPORTED = frozenset({"SEND_REQUEST", "SEND_REMINDER", "RUN_ESCALATION"})
"""The actions whose results a wait takes (rule 12, docs/rules.md); the others are POSTed and
not reported (a result for them would be rejected as unmatched)."""
DEFAULT_TIMEOUT_S = 10.0
"""Per POST: a webhook that has not answered in ten seconds is down for this POST (the
adapter POSTs again, `RetryPolicy`, then the definition's on_send_failure decides)."""
DEFAULT_CONCURRENCY = 8
"""POSTs in flight: enough to hide a slow receiver's latency, few enough not to
flood it (a retry storm after an outage arrives at this rate at most)."""
DEFAULT_METRICS_PORT = 6070
BATCH = 100
"""Actions taken per round: a commit per round, and a round waits for its slowest POST."""
REPORT_RETRY_S = 1.0
"""Results Kafka did not acknowledge are reported again after this, then twice as long each
time up to `REPORT_RETRY_MAX_S`, until it does (the batch is committed only then)."""
REPORT_RETRY_MAX_S = 30.0
FIELDS = ("correlationKey", "waitKey", "actionId", "idempotencyKey", "definition", "action",
          "party", "level", "attempt", "sendAttempt", "tenant")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class Route:
    url: str
    definitions: frozenset[str] | None = None
    actions: frozenset[str] | None = None
    parties: frozenset[str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def matches(self, action: Action) -> bool:
        return ((self.definitions is None or action.definition in self.definitions)
                and (self.actions is None or action.action.value in self.actions)
                and (self.parties is None or (action.party or "") in self.parties))


@dataclass(frozen=True)
class WebhookConfig:
    routes: tuple[Route, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S
    concurrency: int = DEFAULT_CONCURRENCY
    retry: RetryPolicy = RetryPolicy()
    group: str | None = None
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_host: str = "127.0.0.1"
    from_beginning: bool = False


def _fail(where: str, field_name: str, expected: str, found: Any) -> ConfigError:
    return ConfigError(f"{where}: field '{field_name}': Expected {expected}, but got {found!r}")


def seconds(text: str | float | int, where: str, field_name: str) -> float:
    """A timeout as seconds (``2.5``) or an ISO 8601 duration (``PT10S``)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        value = float(text)
    elif isinstance(text, str) and text.startswith("P"):
        try:
            value = parse_duration_ms(text) / 1000
        except ValueError:
            raise _fail(where, field_name, "an ISO 8601 duration such as PT10S", text) from None
    else:
        try:
            value = float(text)
        except (TypeError, ValueError):
            raise _fail(where, field_name, "seconds, or an ISO 8601 duration such as PT10S",
                        text) from None
    if value <= 0:
        raise _fail(where, field_name, "a time above zero", text)
    return value


def _names(raw: Any, where: str, field_name: str) -> frozenset[str] | None:
    if raw is None:
        return None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items or not all(
            isinstance(i, str) and i for i in items):
        raise _fail(where, field_name, "a name or a list of names", raw)
    return frozenset(items)


def _expand(text: str, where: str, field_name: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` from the environment: secrets (a token) stay out of the file."""
    def one(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise _fail(where, field_name, f"${{{m.group(1)}}} to be set in the environment",
                        text)
        return env[m.group(1)]
    return _VARIABLE.sub(one, text)


def check_template(url: str, where: str, field_name: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise _fail(where, field_name, "an http:// or https:// URL template", url)
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(url) if f is not None}
    except ValueError as exc:
        raise _fail(where, field_name, f"a URL template ({exc})", url) from None
    unknown = sorted(names - set(FIELDS))
    if unknown:
        raise _fail(where, field_name, f"placeholders among {', '.join(FIELDS)}",
                    "{" + unknown[0] + "}")
    return url


SETTINGS = ("routes", "timeout", "concurrency", "retries", "max_retry_wait")
"""The keys of the YAML file."""


def load_config(path: Path | None, *, url: str | None = None,
                env: Mapping[str, str] | None = None, **overrides: Any) -> WebhookConfig:
    """The adapter's routes: from the YAML file at ``path``, or the one template ``url``."""
    env = os.environ if env is None else env
    routes: list[Route] = []
    raw: dict[str, Any] = {}
    where = str(path) if path is not None else "XWAIT_WEBHOOK_URL"
    if path is not None:
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read the webhook configuration: {exc}") from exc
        if not isinstance(loaded, dict):
            raise _fail(where, "(document)", "a mapping", type(loaded).__name__)
        raw = loaded
        unknown = sorted(set(raw) - set(SETTINGS))
        if unknown:
            raise _fail(where, unknown[0], f"one of {', '.join(SETTINGS)}", unknown[0])
        if not isinstance(raw.get("routes"), list) or not raw["routes"]:
            raise _fail(where, "routes", "a list of routes", raw.get("routes"))
        for i, r in enumerate(raw["routes"]):
            at = f"routes[{i}]"
            if not isinstance(r, dict):
                raise _fail(where, at, "a mapping with url", r)
            extra = sorted(set(r) - {"url", "definition", "action", "party", "headers"})
            if extra:
                raise _fail(where, f"{at}.{extra[0]}",
                            "one of url, definition, action, party, headers", extra[0])
            if not isinstance(r.get("url"), str):
                raise _fail(where, f"{at}.url", "a URL template", r.get("url"))
            headers = r.get("headers") or {}
            if not isinstance(headers, dict):
                raise _fail(where, f"{at}.headers", "a mapping of header to value", headers)
            routes.append(Route(
                url=check_template(_expand(r["url"], where, f"{at}.url", env), where,
                                   f"{at}.url"),
                definitions=_names(r.get("definition"), where, f"{at}.definition"),
                actions=_names(r.get("action"), where, f"{at}.action"),
                parties=_names(r.get("party"), where, f"{at}.party"),
                headers={str(k): _expand(str(v), where, f"{at}.headers.{k}", env)
                         for k, v in headers.items()}))
    if url is not None:
        routes.append(Route(url=check_template(url, "XWAIT_WEBHOOK_URL", "url")))
    if not routes:
        raise ConfigError("Expected a webhook configuration (--config FILE or "
                          "XWAIT_WEBHOOK_CONFIG) or one URL template (--url or "
                          "XWAIT_WEBHOOK_URL), but got neither")
    timeout = overrides.pop("timeout_s", None)
    concurrency = overrides.pop("concurrency", None)
    if concurrency is None:
        concurrency = raw.get("concurrency", DEFAULT_CONCURRENCY)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise _fail(where, "concurrency", "a whole number of POSTs in flight, 1 or more",
                    concurrency)
    retries = overrides.pop("retries", None)
    if retries is None:
        retries = raw.get("retries", DEFAULT_RETRIES)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise _fail(where, "retries", "a whole number of POSTs again, 0 or more", retries)
    max_wait = overrides.pop("max_retry_wait_s", None)
    return WebhookConfig(
        routes=tuple(routes),
        timeout_s=seconds(timeout if timeout is not None
                          else raw.get("timeout", DEFAULT_TIMEOUT_S), where, "timeout"),
        concurrency=concurrency,
        retry=RetryPolicy(retries, seconds(
            max_wait if max_wait is not None
            else raw.get("max_retry_wait", DEFAULT_MAX_RETRY_WAIT_S), where, "max_retry_wait")),
        **{k: v for k, v in overrides.items() if v is not None})


def template_values(action: Action) -> dict[str, str]:
    record = action.to_record()
    values = {name: urllib.parse.quote(str(record.get(name) if record.get(name) is not None
                                           else ""), safe="")
              for name in FIELDS if name != "waitKey"}
    values["waitKey"] = urllib.parse.quote(action.correlation_key.split("~", 1)[0], safe="")
    values["idempotencyKey"] = urllib.parse.quote(action.send_key, safe="")
    return values


def body_of(action: Action) -> bytes:
    """The action as JSON, its payload nested as JSON (text that is not JSON as text)."""
    record = action.to_record()
    record["payload"] = action.payload
    return json.dumps(record, separators=(",", ":")).encode()


def headers_of(action: Action, route: Route) -> dict[str, str]:
    """``Idempotency-Key``: the same for every POST of one action (its ``idempotencyKey``:
    the adapter's retries, xwait's send retries and a run after a restart alike), what a
    receiver drops repeats by; ``X-Xwait-Action-Id``: this send attempt's own id; then the
    route's headers."""
    return {"Idempotency-Key": action.send_key, "X-Xwait-Action-Id": action.action_id,
            "X-Xwait-Correlation-Key": action.correlation_key, **route.headers}


class Metrics:
    """The adapter's own Prometheus metrics (a registry of its own, on its own port)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.actions = Counter(
            "xwait_webhook_actions_total", "Actions taken, by what became of them: delivered, "
            "failed (to be tried again), permanent, unrouted, undecodable",
            ["definition", "action", "result"], registry=self.registry)
        self.post_seconds = Histogram(
            "xwait_webhook_post_seconds", "Time of each POST, to its answer or timeout",
            ["action"], registry=self.registry)
        self.retries = Counter(
            "xwait_webhook_retries_total", "POSTs made again by the adapter itself, by the "
            "answer's status that asked for it (none: a timeout or no connection)",
            ["action", "status"], registry=self.registry)
        self.reported = Counter(
            "xwait_webhook_results_reported_total", "Results produced to the replies topic",
            ["status"], registry=self.registry)
        self.report_retries = Counter(
            "xwait_webhook_report_retries_total", "Times the results of a batch were "
            "reported again after Kafka did not acknowledge them", registry=self.registry)
        self.batches = Counter(
            "xwait_webhook_batches_total", "Batches committed", registry=self.registry)
        self.last_commit = Gauge(
            "xwait_webhook_last_commit_timestamp_seconds", "When the last batch was committed",
            registry=self.registry)


class WebhookAdapter:
    """The loop of the module's docstring; `run` until `stop` (SIGTERM, SIGINT)."""

    def __init__(self, settings: Settings, config: WebhookConfig) -> None:
        self.settings = settings
        self.config = config
        self.topic = settings.topic("actions")
        self.group = config.group or f"{settings.topic_prefix}-webhook"
        self.metrics = Metrics()
        self.stopping = threading.Event()
        self._codec = codec.for_settings(settings)
        self._start_ms = int(time.time() * 1000)
        self._assigned = threading.Event()
        self._consumer = build(Consumer, settings.confluent(**{
            "group.id": self.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "client.id": "xwait-webhook",
        }))
        self._client = XwaitClient(settings, check_keys=False)
        self._pool = ThreadPoolExecutor(config.concurrency, thread_name_prefix="xwait-webhook")
        self._sender = Sender(config.timeout_s, config.retry, connections=config.concurrency,
                              stopping=self.stopping)

    # -- where a partition starts ----------------------------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The committed offset; for a partition the group never committed, where its first
        run starts (the beginning, or the actions written since the adapter started),
        committed at once: a restart before anything was taken there must start there too,
        not at its own start time, or what came meanwhile would be skipped."""
        ask = self.settings.connect_timeout
        found = consumer.committed(partitions, timeout=ask)
        placed = [tp for tp in found if tp.offset >= 0]
        fresh = [tp for tp in found if tp.offset < 0]
        if fresh:
            if self.config.from_beginning:
                starts = [consumer.get_watermark_offsets(tp, timeout=ask)[0]
                          for tp in fresh]
            else:
                by_time = consumer.offsets_for_times(
                    [TopicPartition(tp.topic, tp.partition, self._start_ms) for tp in fresh],
                    timeout=ask)
                starts = [tp.offset if tp.offset >= 0 else consumer.get_watermark_offsets(
                    tp, timeout=ask)[1] for tp in by_time]
            first = [TopicPartition(tp.topic, tp.partition, start)
                     for tp, start in zip(fresh, starts, strict=True)]
            consumer.commit(offsets=first, asynchronous=False)
            placed += first
        consumer.assign(placed)
        self._assigned.set()

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> None:
        known_topics(self._consumer, self.settings, self.topic)
        if self.config.metrics_port:
            start_http_server(self.config.metrics_port, self.config.metrics_host,
                              registry=self.metrics.registry)
        self._consumer.subscribe([self.topic], on_assign=self._on_assign)
        log.info("webhook adapter started group=%s topic=%s routes=%d", self.group,
                 self.topic, len(self.config.routes))
        try:
            while not self.stopping.is_set():
                # Never waits out the poll while actions are there (streams.polling).
                batch = [m for m in available(self._consumer, BATCH, 0.5) if self._usable(m)]
                if batch:
                    self.handle(batch)
        finally:
            self._pool.shutdown(wait=True)
            self._sender.close()
            self._consumer.close()

    def stop(self) -> None:
        self.stopping.set()

    def _usable(self, msg: Message) -> bool:
        err = msg.error()
        if err is None:
            return True
        if err.fatal():
            raise KafkaUnavailable(f"{self.topic}: fatal consumer error: {err.str()}")
        if err.code() != KafkaError._PARTITION_EOF:  # noqa: SLF001 - public constant
            log.warning("consumer error topic=%s error=%s", self.topic, err.str())
        return False

    def handle(self, batch: list[Message]) -> None:
        """Steps 2-4 for one batch: POST, report and flush, commit."""
        routed: list[tuple[Action, Route]] = []
        for msg in batch:
            action = self._decode(msg)
            if action is None:
                continue
            route = next((r for r in self.config.routes if r.matches(action)), None)
            if route is None:
                self.metrics.actions.labels(action.definition, action.action.value,
                                            "unrouted").inc()
                continue
            routed.append((action, route))
        stopped = 0
        results: list[tuple[Action, Delivery, int]] = []
        unreported: ClientError | None = None
        # Reported as each is done: an action waiting out a Retry-After holds back the
        # commit of its batch, not the results of the others.
        for done in as_completed([self._pool.submit(self._deliver, a, r) for a, r in routed]):
            action, delivery = done.result()
            if delivery.stopped:
                stopped += 1
                continue
            self.metrics.actions.labels(action.definition, action.action.value,
                                        delivery.result).inc()
            if action.action.value not in REPORTED:
                continue
            results.append((action, delivery, int(time.time() * 1000)))
            if unreported is None:
                try:
                    self._report(*results[-1])
                except (KafkaUnavailable, DeliveryFailed) as exc:
                    unreported = exc
        if unreported is None:
            try:
                self._client.flush()
            except (KafkaUnavailable, DeliveryFailed) as exc:
                unreported = exc
        if unreported is not None and not self._report_again(results, unreported):
            return  # stopping: nothing of the batch is committed
        if stopped:
            log.info("stopped while %d action(s) waited to be POSTed again: the batch is not "
                     "committed, the next run POSTs it again (same Idempotency-Key)", stopped)
            return
        self._commit(batch)

    def _report(self, action: Action, delivery: Delivery, at: int) -> None:
        if delivery.delivered:
            self._client.report_delivered(action.correlation_key, action.action_id, at=at,
                                          wait=False)
        else:
            self._client.report_failed(action.correlation_key, action.action_id,
                                       delivery.error or "failed",
                                       permanent=delivery.permanent, at=at, wait=False)
        self.metrics.reported.labels("delivered" if delivery.delivered else "failed").inc()

    def _report_again(self, results: list[tuple[Action, Delivery, int]],
                      error: ClientError) -> bool:
        """Report the batch's results until Kafka takes them all; False if stopped first.

        The adapter exited when one report went unacknowledged (a busy CI round's
        broker answered its first metadata request after more than 5 s), and each
        action of its batch was POSTed again by its next run.  A result is
        reported again instead, each a second or two later, for as long as it
        takes: Kafka may have kept an earlier copy, and xwait discards a
        result of a send that already has one (`duplicate_result`).
        """
        wait_s = REPORT_RETRY_S
        while True:
            log.warning("the results of %d action(s) were not acknowledged (%s): reporting "
                        "them again in %.0f s", len(results), error, wait_s)
            self.metrics.report_retries.inc()
            if self.stopping.wait(wait_s):
                return False
            wait_s = min(2 * wait_s, REPORT_RETRY_MAX_S)
            try:
                for result in results:
                    self._report(*result)
                self._client.flush()
                return True
            except (KafkaUnavailable, DeliveryFailed) as exc:
                error = exc

    def _deliver(self, action: Action, route: Route) -> tuple[Action, Delivery]:
        url = route.url.format_map(template_values(action))

        before: list[Delivery] = []

        def observe(one: Delivery) -> None:
            self.metrics.post_seconds.labels(action.action.value).observe(one.seconds)
            if before:  # a retry, asked for by the answer before it
                self.metrics.retries.labels(action.action.value,
                                            str(before[-1].http_status or "none")).inc()
            before.append(one)

        delivery = self._sender.deliver(url, body_of(action), headers_of(action, route),
                                        observe)
        log.info("POST action=%s id=%s key=%s url=%s result=%s posts=%d %s",
                 action.action.value, action.action_id, action.correlation_key, url,
                 delivery.result, delivery.posts, delivery.error or delivery.http_status)
        return action, delivery

    def _decode(self, msg: Message) -> Action | None:
        try:
            record = self._codec.decode(RecordType.ACTION, msg.value())
        except UndecodableRecord as exc:
            log.warning("undecodable action partition=%s offset=%s: %s", msg.partition(),
                        msg.offset(), exc)
            self.metrics.actions.labels("", "", "undecodable").inc()
            return None
        return Action.from_record(record)

    def _commit(self, batch: Iterable[Message]) -> None:
        last: dict[int, int] = {}
        for msg in batch:
            p, o = msg.partition(), msg.offset()
            if p is not None and o is not None:
                last[p] = max(last.get(p, -1), o)
        try:
            self._consumer.commit(offsets=[TopicPartition(self.topic, p, o + 1)
                                           for p, o in last.items()], asynchronous=False)
        except KafkaException as exc:
            # The group moved the partitions meanwhile: their new owner reads them from
            # the last commit and sends them again (at least once).
            log.warning("commit failed (the batch will be sent again): %s", exc)
            return
        self.metrics.batches.inc()
        self.metrics.last_commit.set(time.time())


def run(settings: Settings, config: WebhookConfig) -> None:
    """Run the adapter in this process until SIGTERM or SIGINT."""
    adapter = WebhookAdapter(settings, config)

    def stop(_signum: int, _frame: Any) -> None:
        adapter.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    adapter.run()


__all__ = ["Delivery", "DeliveryFailed", "RetryPolicy", "Route", "Sender", "WebhookAdapter",
           "WebhookConfig", "body_of", "headers_of", "load_config", "run", "template_values"]
