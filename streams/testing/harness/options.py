"""The command-line options the benches share, and a bench's plan built from its options."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from streams.core.durations import parse_duration_ms

Plan = TypeVar("Plan")


Number = TypeVar("Number", int, float)


def _number(convert: Callable[[str], Number], ok: Callable[[Number], bool],
            want: str) -> Callable[[str], Number]:
    """An option's type: `convert` of the text, refused (with `want`) unless `ok`."""

    def parse(text: str) -> Number:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {want}, got {text!r}")
        return value

    return parse


positive = _number(int, lambda v: v >= 1, "a number above zero")
"""An option's type: a whole number above zero."""
share = _number(float, lambda v: 0.0 <= v <= 1.0, "a number from 0 to 1")
"""An option's type: a share, from 0 to 1."""


def broker_options(p: argparse.ArgumentParser, name: str, seed: str) -> None:
    """--partitions, --out (bench/results/<name>-<timestamp>.json), --bootstrap and --seed
    (`seed`: what it seeds) of a bench that runs workers of its own on the shared broker."""
    p.add_argument("--partitions", type=positive, default=8,
                   help="partitions of every topic (8)")
    p.add_argument("--out", type=Path, default=None,
                   help=f"JSON file (default bench/results/{name}-<timestamp>.json)")
    p.add_argument("--bootstrap", default=os.environ.get("XWAIT_BOOTSTRAP", "127.0.0.1:9092"),
                   help="Kafka bootstrap servers ($XWAIT_BOOTSTRAP or 127.0.0.1:9092)")
    p.add_argument("--seed", type=int, default=1, help=f"seed of {seed} (1)")


def duration(*words: str) -> Callable[[str], str]:
    """An option's type: an ISO 8601 duration (PT20S), or one of `words` (auto, none)."""

    def parse(text: str) -> str:
        if text in words:
            return text
        try:
            parse_duration_ms(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


def plan_of(cls: type[Plan], args: argparse.Namespace, **overrides: Any) -> Plan:
    """The plan dataclass `cls` from the options of the same names (the rest its defaults),
    `overrides` last."""
    assert dataclasses.is_dataclass(cls)  # noqa: S101 - a plan is a dataclass
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
             if hasattr(args, f.name)}
    return cls(**{**given, **overrides})


__all__ = ["broker_options", "duration", "plan_of", "positive", "share"]
