"""Avro binary encoders generated from a schema: fastavro's bytes at a third of its cost.

Encoding the records a decision produces was the largest single cost left in
the worker's loop (py-spy: ``schemaless_writer`` 9-11% of the main thread in the
drain and the storm; 15-33 us for an Outcome on the 2-core bench machine). The
records are small and their schemas few and fixed, so straight-line Python
generated once per schema - one exact type check and one append per field -
beats fastavro's general walk of the parsed schema.

The generated encoder handles only what it can prove: exact Python types
(``str``, ``int`` within the Avro range, ``bool``, ``bytes``, ``float``,
``dict``, ``list``/``tuple``), known enum symbols, no unknown fields, and
missing fields only where the schema has a default. Anything else raises
:class:`Fallback` and the caller hands the record to fastavro, which either
encodes it (its own coercions) or raises the error the caller reports. So
the fast path never changes what a record encodes to, and never swallows an
error; a property test holds the generated encoders byte-equal to fastavro
for every schema in ``schemas/``.

A schema using something this module does not generate (logical types,
fixed, unions whose branches a Python type cannot tell apart) gets no
encoder (:func:`compile_writer` returns None) and stays on fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Fallback", "Writer", "compile_writer"]

Writer = Callable[[Mapping[str, Any]], bytes]
"""Encodes one record to its Avro binary body, or raises :class:`Fallback`."""

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
# Union branches a Python value's type tells apart, and which of them clash.
_UNION_CLASS = {"null": "null", "boolean": "boolean", "int": "int", "long": "int",
                "float": "float", "double": "float", "bytes": "bytes", "string": "str",
                "enum": "str", "record": "dict", "map": "dict", "array": "list"}


class Fallback(Exception):
    """The generated encoder cannot prove this record encodes as fastavro would."""


class _Unsupported(Exception):
    """The schema uses something no encoder is generated for."""


def _varint(n: int) -> bytes:
    """Avro's variable-length encoding of an already zig-zagged, non-negative int."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes([n]) for n in range(0x80)]


def _long(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _str(s: str) -> bytes:
    b = s.encode()
    return _varint(len(b) << 1) + b


_PACK_FLOAT = struct.Struct("<f").pack
_PACK_DOUBLE = struct.Struct("<d").pack


class _Generator:
    """Builds the source of one encoder; named types become functions of their own."""

    def __init__(self, namespace: str) -> None:
        self.scope: dict[str, Any] = {
            "Fallback": Fallback, "_long": _long,
            "_pack_float": _PACK_FLOAT, "_pack_double": _PACK_DOUBLE,
            "_dict": dict, "_list": list, "_tuple": tuple, "_str_t": str, "_int": int,
            "_bytes_t": bytes, "_float": float,
        }
        self.functions: list[str] = []
        self.named: dict[str, tuple[str, Mapping[str, Any]]] = {}  # name -> (function, schema)
        self.namespace = namespace
        self._count = 0

    def fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}{self._count}"

    def constant(self, value: Any) -> str:
        name = self.fresh("_c")
        self.scope[name] = value
        return name

    # -- type resolution -----------------------------------------------------

    def resolve(self, schema: Any, namespace: str) -> tuple[str, Any, str]:
        """(kind, schema, namespace) for a type, following a reference to a named type."""
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                return schema, schema, namespace
            full = schema if "." in schema else f"{namespace}.{schema}" if namespace else schema
            for name in (full, schema):
                if name in self.named:
                    _, named = self.named[name]
                    return str(named["type"]), named, namespace
            raise _Unsupported(f"unknown type name {schema!r}")
        if isinstance(schema, list):
            return "union", schema, namespace
        if isinstance(schema, Mapping):
            if "logicalType" in schema:
                raise _Unsupported(f"logical type {schema['logicalType']!r}")
            kind = schema.get("type")
            if isinstance(kind, str) and kind in _PRIMITIVES:
                return kind, kind, namespace
            if kind in ("record", "enum", "array", "map"):
                return str(kind), schema, namespace
            raise _Unsupported(f"type {kind!r}")
        raise _Unsupported(f"schema {schema!r}")

    def define(self, schema: Mapping[str, Any], namespace: str) -> str:
        """Register a named type (record or enum) and return the function writing it."""
        space = str(schema.get("namespace", namespace) or "")
        name = str(schema["name"])
        full = name if "." in name else f"{space}.{name}" if space else name
        if full in self.named:
            return self.named[full][0]
        function = self.fresh("_w_")
        self.named[full] = (function, schema)
        if schema["type"] == "enum":
            symbols = {s: _long(i) for i, s in enumerate(schema["symbols"])}
            self.scope[function] = _enum_writer(symbols)
        else:
            self.functions.append(self.record_function(function, schema, space))
        return function

    # -- code ------------------------------------------------------------------

    def record_function(self, function: str, schema: Mapping[str, Any], namespace: str) -> str:
        fields = schema["fields"]
        known = self.constant(frozenset(f["name"] for f in fields))
        lines = [f"def {function}(rec, out):",
                 f"    if type(rec) is not _dict or not rec.keys() <= {known}:",
                 "        raise Fallback"]
        for field in fields:
            name = field["name"]
            value = self.fresh("v")
            if "default" not in field:  # missing: KeyError, which the caller takes as Fallback
                lines.append(f"    {value} = rec[{name!r}]")
                lines.extend(self.value(field["type"], namespace, value, "    "))
                continue
            default = self.constant(self.default_bytes(field["type"], namespace,
                                                       field["default"]))
            lines.append(f"    if {name!r} in rec:")
            lines.append(f"        {value} = rec[{name!r}]")
            lines.extend(self.value(field["type"], namespace, value, "        "))
            lines.append("    else:")
            lines.append(f"        out += {default}")
        return "\n".join(lines)

    def value(self, schema: Any, namespace: str, var: str, indent: str,
              checked: bool = False) -> list[str]:
        """Lines appending the encoding of ``var`` (of type ``schema``) to ``out``.

        ``checked``: a union's branch test already proved the Python type.
        Small ints and short strings append their one length or value byte
        inline: a call less per field is most of what makes this faster.
        """
        kind, resolved, space = self.resolve(schema, namespace)
        i = indent
        if kind == "null":
            return [] if checked else [f"{i}if {var} is not None: raise Fallback"]
        if kind == "boolean":
            return [f"{i}if {var} is True: out += b'\\x01'",
                    f"{i}elif {var} is False: out += b'\\x00'",
                    f"{i}else: raise Fallback"]
        if kind in ("int", "long"):
            low, high = (_INT_MIN, _INT_MAX) if kind == "int" else (_LONG_MIN, _LONG_MAX)
            check = f"type({var}) is not _int or " if not checked else ""
            return [f"{i}if {check}not {low} <= {var} <= {high}: raise Fallback",
                    f"{i}if -64 <= {var} < 64: out.append(({var} << 1) ^ ({var} >> 63))",
                    f"{i}else: out += _long({var})"]
        if kind in ("string", "bytes"):
            data = self.fresh("b")
            lines = [] if checked else [
                f"{i}if type({var}) is not {'_str_t' if kind == 'string' else '_bytes_t'}: "
                "raise Fallback"]
            encode = f"{var}.encode()" if kind == "string" else var
            return [*lines, f"{i}{data} = {encode}",
                    f"{i}if len({data}) < 64: out.append(len({data}) << 1)",
                    f"{i}else: out += _long(len({data}))",
                    f"{i}out += {data}"]
        if kind in ("float", "double"):
            pack = "_pack_float" if kind == "float" else "_pack_double"
            float_check = [] if checked else [f"{i}if type({var}) is not _float: raise Fallback"]
            return [*float_check, f"{i}out += {pack}({var})"]
        if kind in ("record", "enum"):
            return [f"{i}{self.define(resolved, space)}({var}, out)"]
        if kind == "array":
            item = self.fresh("v")
            return [f"{i}if type({var}) is not _list and type({var}) is not _tuple: "
                    "raise Fallback",
                    f"{i}if {var}:",
                    f"{i}    out += _long(len({var}))",
                    f"{i}    for {item} in {var}:",
                    *self.value(resolved["items"], space, item, i + "        "),
                    f"{i}out += b'\\x00'"]
        if kind == "map":
            key, item = self.fresh("k"), self.fresh("v")
            return [f"{i}if type({var}) is not _dict: raise Fallback",
                    f"{i}if {var}:",
                    f"{i}    out += _long(len({var}))",
                    f"{i}    for {key}, {item} in {var}.items():",
                    *self.value("string", space, key, i + "        "),
                    *self.value(resolved["values"], space, item, i + "        "),
                    f"{i}out += b'\\x00'"]
        return self.union(resolved, space, var, indent)

    def union(self, branches: list[Any], namespace: str, var: str, indent: str) -> list[str]:
        """One ``if`` per branch, told apart by the value's Python type."""
        classes = [_UNION_CLASS[self.resolve(b, namespace)[0]] for b in branches]
        if len(set(classes)) != len(classes):
            raise _Unsupported(f"union branches {branches!r} are not told apart by type")
        tests = {"null": "{v} is None", "boolean": "{v} is True or {v} is False",
                 "int": "type({v}) is _int", "float": "type({v}) is _float",
                 "bytes": "type({v}) is _bytes_t", "str": "type({v}) is _str_t",
                 "dict": "type({v}) is _dict",
                 "list": "type({v}) is _list or type({v}) is _tuple"}
        lines: list[str] = []
        for index, (branch, cls) in enumerate(zip(branches, classes, strict=True)):
            keyword = "if" if index == 0 else "elif"
            lines.append(f"{indent}{keyword} {tests[cls].format(v=var)}:")
            lines.append(f"{indent}    out += {_long(index)!r}")
            lines.extend(self.value(branch, namespace, var, indent + "    ", checked=True))
        lines.append(f"{indent}else: raise Fallback")
        return lines

    def default_bytes(self, schema: Any, namespace: str, default: Any) -> bytes:
        """The encoding of a field's default, as fastavro writes a missing field.

        Only the defaults a schema here uses are generated: null (a union with
        null first), an empty array or map, a primitive, an enum symbol.
        """
        kind, resolved, space = self.resolve(schema, namespace)
        if kind == "union":  # a union's default is of its first branch
            if self.resolve(resolved[0], space)[0] == "null" and default is None:
                return _long(0)
        elif kind in ("array", "map") and not default:
            return b"\x00"
        elif kind == "boolean" and isinstance(default, bool):
            return b"\x01" if default else b"\x00"
        elif kind in ("int", "long") and type(default) is int:
            return _long(default)
        elif kind == "string" and isinstance(default, str):
            return _str(default)
        elif kind == "float" and isinstance(default, int | float):
            return _PACK_FLOAT(float(default))
        elif kind == "double" and isinstance(default, int | float):
            return _PACK_DOUBLE(float(default))
        elif kind == "enum" and default in resolved["symbols"]:
            return _long(list(resolved["symbols"]).index(default))
        raise _Unsupported(f"default {default!r} of {schema!r}")


def _enum_writer(symbols: Mapping[str, bytes]) -> Callable[[Any, bytearray], None]:
    def write(value: Any, out: bytearray) -> None:
        encoded = symbols.get(value) if type(value) is str else None
        if encoded is None:
            raise Fallback
        out += encoded
    return write


def compile_writer(schema: Mapping[str, Any]) -> Writer | None:
    """An encoder of records of ``schema`` (the raw JSON form), or None if none is generated."""
    if schema.get("type") != "record":
        return None
    generator = _Generator(str(schema.get("namespace", "") or ""))
    try:
        top = generator.define(schema, generator.namespace)
    except (_Unsupported, KeyError, TypeError):
        return None  # the schema stays on fastavro
    scope = generator.scope
    for source in generator.functions:
        exec(source, scope)  # noqa: S102 - generated from the schema, see module doc
    writer = scope[top]

    def encode(record: Mapping[str, Any]) -> bytes:
        out = bytearray()
        try:
            writer(record, out)
        except Fallback:
            raise
        except Exception as exc:  # e.g. a str with a lone surrogate: fastavro decides
            raise Fallback from exc
        return bytes(out)

    return encode
