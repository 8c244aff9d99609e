"""Where a thread's time goes, by function group: a py-spy raw profile summed by concern.

Run: ``.venv/bin/py-spy record -r 250 -f raw -o PROFILE -- <command>`` (or ``--pid``
on a running worker, ``--threads`` to tell threads apart), then
``.venv/bin/python bench/profile_groups.py PROFILE [--within build_batch]``.

Each sample's stack is read from its innermost frame outwards, and the
sample goes to the group of the first frame a group claims (so jsonschema
called by the rules is "validation", a generated ``__init__`` is its
caller's).  ``--within NAME`` keeps only the samples whose stack holds a
frame of that function (``decide_batch``: the decision path; ``--thread``
selects one thread of a ``--threads`` profile by the name py-spy gives it).
A sampling profile on a busy machine counts the time a thread was seen in
each place; the shares hold, the absolute figures do not.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

# (group, frame pattern): the first pattern matching a frame's "function (file:line)".
# A function name as py-spy writes it: "Class.method", "outer.<locals>.inner".
_F = r"(?:^|[.])"

# (group, frame pattern): the first pattern matching a frame's "function (file:line)".
GROUPS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(pattern)) for name, pattern in [
    ("native record path", r"streams/_native|streams/processor/native\.py"),
    ("validation (jsonschema)", r"jsonschema|referencing|streams/core/validation\.py"),
    ("ids (sha1)", r"streams/core/rules/ids\.py"),
    ("input decode", _F + r"(decode|decode_either|_decode_json_bytes|from_json|_read_body|"
                     r"_decode_single_object|_json_type)\b.* \(streams/codec/codec\.py|"
                     r"streams/codec/jsonform\.py|^to_event |json/decoder\.py"),
    ("output encode (Avro)", r"streams/codec/avro_writer\.py|" + _F + r"encode \(streams/codec/|"
                             + _F + r"(outcome_record|action_record|reply_record|command_record|"
                             r"result_record|timer_record|rejected)\b.*records\.py|fastavro|"
                             + _F + r"_w_\d+ "),
    ("row decode", _F + r"(decode_row|_decode_head|_read_str32|read_head|raw_facts)\b|"
                   + _F + r"(decode_slot|_dec_\w+|<lambda>)\b.*state_codec\.py|" + _F
                   + r"_dec_wait "),
    ("row encode", _F + r"(encode_row|_encode_head|_str32)\b|"
                   + _F + r"(encode_slot|_enc_\w+|_put_origin)\b.*state_codec\.py|"
                   + _F + r"_enc_wait "),
    ("head / index bookkeeping", _F + r"head_of |streams/timers/|" + _F + r"_take \(.*batch"),
    ("decide (pure rules)", r"streams/core/"),
    ("handler glue", r"streams/processor/(records|model|envelope)\.py|streams/partitioning\.py"),
    ("batch loop", r"streams/processor/batch\.py"),
    ("commit: Kafka", r"streams/processor/commit\.py|confluent_kafka"),
    ("store: RocksDB", r"streams/processor/state\.py|rocksdict"),
    ("applier other", r"streams/processor/applier\.py"),
    ("reader / intake / sequencer", r"streams/processor/(reader|intake|inputs|sequencer|flow|"
                                    r"gaps|stream_clock)\.py"),
    ("metrics / observers / console", r"streams/console/|prometheus|streams/processor/"
                                      r"(latency|census|looplag|collector)\.py"),
    ("asyncio / faust / aiokafka", r"asyncio|faust|mode/|aiokafka|aiohttp|<frozen"),
]]
_FRAME = re.compile(r"^(.*) \((.*)\)$")


_IMPORTING = re.compile(r"^_find_and_load |^_call_with_frames_removed ")


def group_of(stack: list[str]) -> str:
    if any(_IMPORTING.search(frame) for frame in stack):
        return "start-up: imports"
    for frame in reversed(stack):
        for name, pattern in GROUPS:
            if pattern.search(frame):
                return name
    return "other"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("profile", type=Path)
    p.add_argument("--within", help="keep samples with a frame of this function")
    p.add_argument("--thread", help="keep samples of this thread (py-spy --threads)")
    p.add_argument("--top", type=int, default=0, help="also list the N innermost functions")
    args = p.parse_args(argv)
    groups: Counter[str] = Counter()
    inner: Counter[str] = Counter()
    total = 0
    for line in args.profile.read_text(encoding="utf-8").splitlines():
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text:
            continue
        stack = stack_text.split(";")
        if args.thread and not any(args.thread in f for f in stack[:1]):
            continue
        if args.within and not any(f.startswith(args.within + " ") for f in stack):
            continue
        n = int(count_text)
        total += n
        groups[group_of(stack)] += n
        inner[stack[-1]] += n
    print(f"{total} samples" + (f" within {args.within}" if args.within else ""))
    for name, n in groups.most_common():
        print(f"  {name:34} {n:7}  {100 * n / total:5.1f}%")
    for frame, n in inner.most_common(args.top):
        print(f"    {100 * n / total:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
