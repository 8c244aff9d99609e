"""Validate before believing (rule 4): parse ``responseData`` and check its schema.

This is on the hot path (every reply), so each schema is compiled once and
the compiled validator is cached on the schema's JSON text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema import exceptions as schema_exceptions
from jsonschema import validators

__all__ = ["Parsed", "compiled_validator", "parse_json", "schema_issue"]

_SCHEMA_CACHE_SIZE = 256
"""Far more definitions than any deployment loads; eviction would only cost
a recompile, never a wrong answer."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """JSON text parsed, or the reason it could not be."""

    value: Any
    issue: str | None


def parse_json(text: str | None) -> Parsed:
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
