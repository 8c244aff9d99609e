"""Validate before believing (rule 4): parse ``responseData`` and check its schema.

This is on the hot path (every reply), so each schema is compiled once and
the compiled validator is cached on the schema's JSON text.  Parsing and
checking are pure functions of the text, and short answers repeat (an
approval is one of a handful of texts): their verdicts are remembered
(jsonschema takes about 20 us a check here, a cache hit well under one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import exceptions as schema_exceptions
from jsonschema import validators

__all__ = ["Parsed", "compiled_validator", "parse_json", "schema_issue", "text_issue"]

MEMO_TEXT = 256
"""Longest answer whose parse and verdict are remembered: a few thousand short
texts cost about a megabyte; long ones rarely repeat."""
_MEMO_SIZE = 4096

_SCHEMA_CACHE_SIZE = 256
"""Far more definitions than any deployment loads; eviction would only cost
a recompile, never a wrong answer."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """JSON text parsed, or the reason it could not be."""

    value: Any
    issue: str | None


def parse_json(text: str | None) -> Parsed:
    """The parsed text (a shared value for short texts: never change it)."""
    if text is not None and len(text) <= MEMO_TEXT:
        return _parse_remembered(text)
    return _parse(text)


@lru_cache(maxsize=_MEMO_SIZE)
def _parse_remembered(text: str) -> Parsed:
    return _parse(text)


def _parse(text: str | None) -> Parsed:
    if text is None:
        return Parsed(None, "Expected responseData as JSON text, but it is missing")
    try:
        return Parsed(json.loads(text), None)
    except (ValueError, RecursionError) as exc:
        shown = text if len(text) <= 60 else text[:57] + "..."
        return Parsed(None, f"Expected responseData to be JSON, but {shown!r} is not ({exc})")


@lru_cache(maxsize=_SCHEMA_CACHE_SIZE)
def compiled_validator(schema_json: str) -> Any:
    """The validator class matching the schema's ``$schema`` (Draft 2020-12 if absent)."""
    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    return cls(schema)


def text_issue(schema_json: str | None, text: str, value: Any) -> str | None:
    """`schema_issue` of `value`, the parse of `text`: remembered for short texts."""
    if len(text) <= MEMO_TEXT:
        return _text_issue_remembered(schema_json, text)
    return schema_issue(schema_json, value)


@lru_cache(maxsize=_MEMO_SIZE)
def _text_issue_remembered(schema_json: str | None, text: str) -> str | None:
    return schema_issue(schema_json, _parse_remembered(text).value)


def schema_issue(schema_json: str | None, value: Any) -> str | None:
    """None when ``value`` fits the schema, else the most relevant error, readable."""
    if schema_json is None:
        return None
    validator = compiled_validator(schema_json)
    error = schema_exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"Expected responseData to match the schema at {where}, but {error.message}"
