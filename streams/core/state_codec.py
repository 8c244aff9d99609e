"""The stored form of a ``Slot``: compact JSON, versioned, stdlib only.

One row per wait key, and a million parked waits are normal, so every byte
counts: keys are one or two letters, fields at their default are left out,
timers and trace entries are arrays. ``v`` is the format version; a reader
refuses versions it does not know rather than guess (a newer writer's row).

Layout (``v`` 1)::

    slot   {"v":1, "w":wait?, "e":[held..]?, "ec":[heldcmd..]?, "et":timer?, "g":next_generation,
            "tp":traceparent?}
    timer  [kind, due_at, generation]          kind: r d p x e (see _KIND)
    held   [reply, received_at, by_operator?, seq?, who?]
           (by_operator 0/1 and seq when more follows; who {"o":operator?, "z":reason?})
    reply  {"c":key, "r":responseData, "t":tenant?, "h":channel?, "i":replyId?, "s":sentAt?,
            "og"|"os":origin?}
    heldcmd [command, received_at, seq?]
    command {"c":key, "k":kind, "z":reason?, "ro":reviewOutcome?, "rn":reviewNote?,
             "r":responseData?, "o":operator?, "dl":deadline?, "mb":moveBy?, "v":version?,
             "oi":operationId?, "og"|"os":origin?}
    origin "og": [topic, partition, offset, base64(value)]
           "os": [topic, partition, offset, base64(before), base64(after), form]
                 value = before + responseData in `form` + after (see _FORMS)

    send   [kind, stage, level, attempt, tries?, state?, party?, retry_at?, error?]
           (kind q m x: SEND_REQUEST SEND_REMINDER RUN_ESCALATION; state p d r f;
            trailing defaults left out)
    heldresult [result, received_at]
    result {"c":key, "a":actionId, "s":status, "e":error?, "p":1?, "t":at?, "og":origin?}
    trace  [at, event, detail]
    wait   short keys from _WAIT_KEYS, defaults omitted

"ec", a held reply's "who", a command's "dl"/"mb"/"v"/"oi", the timer kind "s"
(send_retry) and the wait keys "op", "or", "pd", "sd", "hr", "se", "dv" were
added without a version change: rows written before them simply hold none.
So was "os" (2026-12-03): a held record's bytes hold its responseData once
more, and base64 makes them a third larger, so a 390 KB reply held for its
request made a 910 KB row (over the 900,000-byte limit); "os" stores the
bytes around the responseData, and the row holds the answer once.  A build
before it reads such a record without its original bytes.  So was "tp" (the
wait's W3C traceparent, `Slot.traceparent`): at the slot's top level, which
every reader so far ignores when it does not know a key (an unknown key in
"w" is refused), so a worker of 0.2.0 reads such a row and writes it back
without it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Any

import orjson

from streams.core.effects import ActionKind, OutcomeKind, OutcomeReason, TraceEntry
from streams.core.events import (
    ActionResult,
    Command,
    CommandKind,
    Origin,
    Reply,
    ResultStatus,
    TimerKind,
)
from streams.core.frozen import twin
from streams.core.state import (
    ArmedTimer,
    HeldCommand,
    HeldReply,
    HeldResult,
    Send,
    SendState,
    Slot,
    Suspension,
    Wait,
    WaitStatus,
)

__all__ = ["STATE_VERSION", "StateDecodeError", "decode_slot", "encode_slot"]

STATE_VERSION = 1

_KIND = {
    TimerKind.REMINDER: "r",
    TimerKind.DEADLINE: "d",
    TimerKind.POLL: "p",
    TimerKind.RETENTION: "x",
    TimerKind.EARLY_REPLY: "e",
    TimerKind.SEND_RETRY: "s",
}
_KIND_BACK = {v: k for k, v in _KIND.items()}

_WAIT_KEYS = {
    "key": "k", "definition": "d", "tenant": "t", "parked_at": "a", "status": "s",
    "payload": "p", "parties": "ps", "deadline_override_ms": "o", "stage": "sg",
    "level": "l", "stage_reminders": "sr", "reminders_sent": "rs", "polls": "po",
    "reviews": "rv", "timers": "tm", "suspension": "su", "held": "h",
    "response_data": "rd", "response_valid": "ok", "validation_issue": "vi",
    "review_outcome": "ro", "review_note": "rn", "stage_results": "sx",
    "outcome": "oc", "reason": "rz", "ended_at": "ea", "reply_ids": "ri",
    "trace": "tr", "trace_dropped": "td", "operator": "op", "operator_reason": "or",
    "payload_dropped": "pd", "sends": "sd", "held_results": "hr", "send_error": "se",
    "definition_version": "dv",
}
_WAIT_NAMES = {v: k for k, v in _WAIT_KEYS.items()}
_WAIT_DEFAULTS = {
    f.name: f.default for f in fields(Wait) if f.default is not MISSING
}


class StateDecodeError(ValueError):
    """Stored bytes that are not a slot this version can read (corruption or a newer writer)."""


def encode_slot(slot: Slot) -> bytes:
    out: dict[str, Any] = {"v": STATE_VERSION, "g": slot.next_generation}
    if slot.wait is not None:
        out["w"] = _enc_wait(slot.wait)
    if slot.early_replies:
        out["e"] = [_enc_held(h) for h in slot.early_replies]
    if slot.early_commands:
        out["ec"] = [[_enc_command(h.command), h.received_at, *([h.seq] if h.seq else [])]
                     for h in slot.early_commands]
    if slot.early_timer is not None:
        out["et"] = _enc_timer(slot.early_timer)
    if slot.traceparent is not None:
        out["tp"] = slot.traceparent
    return orjson.dumps(out)


def decode_slot(data: bytes) -> Slot:
    try:
        raw = orjson.loads(data)
        if not isinstance(raw, dict) or raw.get("v") != STATE_VERSION:
            version = raw.get("v") if isinstance(raw, dict) else None
            raise StateDecodeError(
                f"Expected a stored slot of version {STATE_VERSION}, but found version {version!r}"
            )
        return Slot(
            wait=_dec_wait(raw["w"]) if "w" in raw else None,
            early_replies=tuple(_dec_held(h) for h in raw.get("e", ())),
            early_timer=_dec_timer(raw["et"]) if "et" in raw else None,
            next_generation=int(raw["g"]),
            early_commands=tuple(HeldCommand(_dec_command(h[0]), int(h[1]),
                                             int(h[2]) if len(h) > 2 else 0)
                                 for h in raw.get("ec", ())),
            traceparent=_dec_traceparent(raw.get("tp")),
        )
    except StateDecodeError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise StateDecodeError(f"Expected a stored slot, but could not read it: {exc}") from exc


def _dec_traceparent(raw: Any) -> str | None:
    return raw if isinstance(raw, str) else None


def _enc_timer(t: ArmedTimer) -> list[Any]:
    return [_KIND[t.kind], t.due_at, t.generation]


def _dec_timer(raw: list[Any]) -> ArmedTimer:
    return ArmedTimer(kind=_KIND_BACK[raw[0]], due_at=int(raw[1]), generation=int(raw[2]))


def _enc_reply(r: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {"c": r.correlation_key, "r": r.response_data}
    if r.tenant is not None:
        out["t"] = r.tenant
    if r.channel:
        out["h"] = r.channel
    if r.reply_id is not None:
        out["i"] = r.reply_id
    if r.sent_at is not None:
        out["s"] = r.sent_at
    if r.origin is not None:
        _put_origin(out, r.origin, r.response_data)
    return out


def _dec_reply(raw: dict[str, Any]) -> Reply:
    return Reply(correlation_key=raw["c"], response_data=raw["r"], tenant=raw.get("t"),
                 channel=raw.get("h", ""), reply_id=raw.get("i"), sent_at=raw.get("s"),
                 origin=_get_origin(raw, raw["r"]))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# How a record's bytes may hold its responseData: Avro holds the UTF-8 text as
# it is; JSON escapes it inside a string, as orjson and JavaScript do (only
# quote, backslash and control characters) or as Python's json does (all
# non-ASCII as \uXXXX too).  A record holding it any other way is stored whole.
_FORMS: tuple[Callable[[str], bytes], ...] = (
    lambda text: text.encode("utf-8"),
    lambda text: orjson.dumps(text)[1:-1],
    lambda text: json.dumps(text)[1:-1].encode("ascii"),
)


def _put_origin(out: dict[str, Any], o: Origin, data: str | None) -> None:
    """Store where a held record came from and its bytes, without its responseData again."""
    if data:
        for form, render in enumerate(_FORMS):
            inner = render(data)
            at = o.value.rfind(inner)
            if at >= 0:
                before, after = o.value[:at], o.value[at + len(inner):]
                out["os"] = [o.topic, o.partition, o.offset, _b64(before), _b64(after), form]
                return
    out["og"] = [o.topic, o.partition, o.offset, _b64(o.value)]


def _get_origin(raw: dict[str, Any], data: str | None) -> Origin | None:
    if "os" in raw:
        topic, partition, offset, before, after, form = raw["os"]
        value = base64.b64decode(before) + _FORMS[int(form)](data or "") + base64.b64decode(after)
        return Origin(str(topic), int(partition), int(offset), value)
    if "og" in raw:
        topic, partition, offset, value = raw["og"]
        return Origin(str(topic), int(partition), int(offset), base64.b64decode(value))
    return None


_COMMAND_KEYS = {"reason": "z", "review_outcome": "ro", "review_note": "rn",
                 "response_data": "r", "operator": "o", "deadline": "dl", "move_by": "mb",
                 "version": "v", "operation_id": "oi"}


def _enc_command(c: Command) -> dict[str, Any]:
    out: dict[str, Any] = {"c": c.correlation_key, "k": c.command.value}
    for name, short in _COMMAND_KEYS.items():
        value = getattr(c, name)
        if value is not None:
            out[short] = value
    if c.origin is not None:
        _put_origin(out, c.origin, c.response_data)
    return out


def _dec_command(raw: dict[str, Any]) -> Command:
    optional = {name: raw[short] for name, short in _COMMAND_KEYS.items() if short in raw}
    return Command(correlation_key=raw["c"], command=CommandKind(raw["k"]),
                   origin=_get_origin(raw, raw.get("r")), **optional)


def _enc_held(h: HeldReply) -> list[Any]:
    out: list[Any] = [_enc_reply(h.reply), h.received_at]
    who = {k: v for k, v in (("o", h.operator), ("z", h.reason)) if v is not None}
    if h.by_operator or h.seq or who:
        out.append(1 if h.by_operator else 0)
    if h.seq or who:
        out.append(h.seq)
    if who:
        out.append(who)
    return out


def _dec_held(raw: list[Any]) -> HeldReply:
    who: dict[str, Any] = raw[4] if len(raw) > 4 else {}
    return HeldReply(reply=_dec_reply(raw[0]), received_at=int(raw[1]),
                     by_operator=len(raw) > 2 and bool(raw[2]),
                     seq=int(raw[3]) if len(raw) > 3 else 0,
                     operator=who.get("o"), reason=who.get("z"))


_SEND_KIND = {ActionKind.SEND_REQUEST: "q", ActionKind.SEND_REMINDER: "m",
              ActionKind.RUN_ESCALATION: "x"}
_SEND_KIND_BACK = {v: k for k, v in _SEND_KIND.items()}
_SEND_STATE = {SendState.PENDING: "p", SendState.DELIVERED: "d", SendState.RETRYING: "r",
               SendState.FAILED: "f"}
_SEND_STATE_BACK = {v: k for k, v in _SEND_STATE.items()}


def _enc_send(s: Send) -> list[Any]:
    out: list[Any] = [_SEND_KIND[s.kind], s.stage, s.level, s.attempt, s.tries,
                      _SEND_STATE[s.state], s.party, s.retry_at, s.error]
    defaults: tuple[Any, ...] = (1, "p", None, None, None)
    while len(out) > 4 and out[-1] == defaults[len(out) - 5]:
        out.pop()
    return out


def _dec_send(raw: list[Any]) -> Send:
    n = len(raw)
    return Send(kind=_SEND_KIND_BACK[raw[0]], stage=int(raw[1]), level=int(raw[2]),
                attempt=int(raw[3]), tries=int(raw[4]) if n > 4 else 1,
                state=_SEND_STATE_BACK[raw[5]] if n > 5 else SendState.PENDING,
                party=raw[6] if n > 6 else None,
                retry_at=int(raw[7]) if n > 7 and raw[7] is not None else None,
                error=raw[8] if n > 8 else None)


def _enc_result(r: ActionResult) -> dict[str, Any]:
    out: dict[str, Any] = {"c": r.correlation_key, "a": r.action_id, "s": r.status.value}
    if r.error is not None:
        out["e"] = r.error
    if r.permanent:
        out["p"] = 1
    if r.at is not None:
        out["t"] = r.at
    if r.origin is not None:
        _put_origin(out, r.origin, None)
    return out


def _dec_result(raw: dict[str, Any]) -> ActionResult:
    return ActionResult(correlation_key=raw["c"], action_id=raw["a"],
                        status=ResultStatus(raw["s"]), error=raw.get("e"),
                        permanent=bool(raw.get("p", 0)), at=raw.get("t"),
                        origin=_get_origin(raw, None))


def _enc_suspension(s: Suspension) -> dict[str, Any]:
    out: dict[str, Any] = {"a": s.at, "b": s.resume_to.value,
                           "m": [[_KIND[k], left] for k, left in s.remaining]}
    if s.reason is not None:
        out["r"] = s.reason
    if s.operator is not None:
        out["o"] = s.operator
    return out


def _dec_suspension(raw: dict[str, Any]) -> Suspension:
    return Suspension(
        reason=raw.get("r"), at=int(raw["a"]), resume_to=WaitStatus(raw["b"]),
        remaining=tuple((_KIND_BACK[k], int(left)) for k, left in raw["m"]),
        operator=raw.get("o"),
    )


# A Wait is written and read for every record a worker decides (py-spy: 7-9%
# of the worker's loop).  The loops below over _WAIT_KEYS, asking per field
# which conversion it needs, cost three times the straight-line code
# generated from the same tables once at import; the bytes are the same
# (a test holds rows written by the loop to them).
_ENC_CONVERT: dict[str, str] = {
    "timers": "[_enc_timer(t) for t in {v}]",
    "held": "[_enc_held(h) for h in {v}]",
    "trace": "[[e.at, e.event, e.detail] for e in {v}]",
    "suspension": "_enc_suspension({v})",
    "sends": "[_enc_send(s) for s in {v}]",
    "held_results": "[[_enc_result(h.result), h.received_at] for h in {v}]",
    "parties": "list({v})", "stage_results": "list({v})", "reply_ids": "list({v})",
    "status": "{v}.value", "outcome": "{v}.value", "reason": "{v}.value",
}
_DEC_CONVERT: dict[str, Any] = {
    "timers": lambda raw: tuple(_dec_timer(t) for t in raw),
    "held": lambda raw: tuple(_dec_held(h) for h in raw),
    "trace": lambda raw: tuple(TraceEntry(int(a), e, d) for a, e, d in raw),
    "suspension": _dec_suspension,
    "sends": lambda raw: tuple(_dec_send(s) for s in raw),
    "held_results": lambda raw: tuple(HeldResult(_dec_result(r), int(a)) for r, a in raw),
    "parties": tuple, "stage_results": tuple, "reply_ids": tuple,
    "status": WaitStatus, "outcome": OutcomeKind, "reason": OutcomeReason,
}


def _generate_wait_codec() -> tuple[Any, Any]:
    if set(_WAIT_KEYS) != {f.name for f in fields(Wait)}:  # a field added without a key
        raise AssertionError("_WAIT_KEYS must name every field of Wait, and only those")
    scope: dict[str, Any] = {"_enc_timer": _enc_timer, "_enc_held": _enc_held,
                             "_enc_suspension": _enc_suspension, "_enc_send": _enc_send,
                             "_enc_result": _enc_result, "new_": object.__new__,
                             "Wait": Wait, "WaitTwin": twin(Wait),
                             "_SHORTS": frozenset(_WAIT_NAMES)}
    enc = ["def _enc_wait(w):", "    out = {}"]
    # Decoding: each field from the raw dict, its default, or (required) a KeyError.
    dec = ["def _dec_wait(raw):",
           "    unknown = raw.keys() - _SHORTS",
           "    if unknown: raise KeyError(sorted(unknown)[0])",
           "    w = new_(WaitTwin)"]  # every field is set below, then it becomes a Wait
    for i, (name, short) in enumerate(_WAIT_KEYS.items()):
        value = _ENC_CONVERT.get(name, "{v}").format(v="v")
        convert = _DEC_CONVERT.get(name)
        if convert is not None:
            scope[f"c{i}"] = convert
        read = f"c{i}(raw[{short!r}])" if convert is not None else f"raw[{short!r}]"
        enc.append(f"    v = w.{name}")
        if name in _WAIT_DEFAULTS:
            scope[f"d{i}"] = _WAIT_DEFAULTS[name]
            enc.append(f"    if not (v == d{i}): out[{short!r}] = {value}")
            dec.append(f"    w.{name} = {read} if {short!r} in raw else d{i}")
        else:
            enc.append(f"    out[{short!r}] = {value}")
            dec.append(f"    w.{name} = {read}")
    enc.append("    return out")
    dec.append("    w.__class__ = Wait")
    dec.append("    return w")
    exec("\n".join(enc), scope)  # noqa: S102 - code built from this module's own tables
    exec("\n".join(dec), scope)  # noqa: S102
    return scope["_enc_wait"], scope["_dec_wait"]


_enc_wait, _dec_wait = _generate_wait_codec()
