"""docs/reference/contract.md: the topics, every record and field, every reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from refpages.markdown import HEADER, REPO, Undocumented, attribute_docs, code, one_line, table


def _enum_rows(members: list[Any]) -> list[list[str]]:
    rows = []
    for member in members:
        doc = attribute_docs(type(member)).get(member.name, "")
        if not doc:
            raise Undocumented(f"{type(member).__name__}.{member.name} has no docstring: say "
                               "what it means under the member")
        rows.append([code(str(member.value)), doc])
    return rows


def _avro_type(t: Any) -> str:
    """An Avro type as the page says it: unions with "or", arrays and maps of their
    items, enums with their symbols, records by name."""
    if isinstance(t, list):
        return " or ".join(_avro_type(x) for x in t)
    if not isinstance(t, dict):
        return str(t)
    said: dict[str, Callable[[], str]] = {
        "array": lambda: f"array of {_avro_type(t['items'])}",
        "map": lambda: f"map of {_avro_type(t['values'])}",
        "enum": lambda: f"enum {t['name']}: {', '.join(t['symbols'])}",
        "record": lambda: f"record {t['name']}",
    }
    kind = str(t["type"])
    return said[kind]() if kind in said else kind


def _record(schema: dict[str, Any]) -> str:
    name = schema["name"]
    if not schema.get("doc"):
        raise Undocumented(f"schemas/{name}.avsc has no doc")
    out = [f"### {name}\n", f"{schema['doc']}\n",
           f"Schema: `schemas/{name}.avsc` (`{schema.get('namespace', '')}.{name}`).\n"]
    rows = []
    nested: list[dict[str, Any]] = []
    for f in schema["fields"]:
        if not f.get("doc"):
            raise Undocumented(f"{name}.{f['name']} (schemas/{name}.avsc) has no doc")
        rows.append([code(f["name"]), _avro_type(f["type"]), f["doc"]])
        types = f["type"] if isinstance(f["type"], list) else [f["type"]]
        for t in types:
            inner = t.get("items") if isinstance(t, dict) and t.get("type") == "array" else t
            if isinstance(inner, dict) and inner.get("type") in ("record", "enum"):
                nested.append(inner)
    out.append(table(["field", "type", "meaning"], rows))
    for inner in nested:
        if inner["type"] == "enum":
            if not inner.get("doc"):
                raise Undocumented(f"the enum {inner['name']} of {name} has no doc")
            out.append(f"`{inner['name']}` ({', '.join(inner['symbols'])}): {inner['doc']}\n")
        else:
            inner_rows = []
            for f in inner["fields"]:
                if not f.get("doc"):
                    raise Undocumented(f"{inner['name']}.{f['name']} has no doc")
                inner_rows.append([code(f["name"]), _avro_type(f["type"]), f["doc"]])
            out.append(f"`{inner['name']}`: {inner.get('doc', '')}\n")
            out.append(table(["field", "type", "meaning"], inner_rows))
    return "\n".join(out)


def contract() -> str:
    from streams import headers
    from streams.core.effects import OutcomeReason, RejectReason
    from streams.core.receipts import Verdict
    from streams.processor.model import ProcessorReject

    spec = yaml.safe_load((REPO / "topology" / "topics.yaml").read_text())
    topic_rows = []
    for key, topic in spec["topics"].items():
        if not topic.get("doc"):
            raise Undocumented(f"topology/topics.yaml: the topic {key} has no doc")
        config = topic.get("config", {})
        kept = config.get("cleanup.policy", "delete")
        if "retention.ms" in config:
            hours = int(config["retention.ms"]) / 3_600_000
            kept += f", {hours / 24:g} days" if hours >= 24 else f", {hours:g} h"
        topic_rows.append([code(topic["name"]), topic["doc"], kept,
                           config.get("message.timestamp.type", "CreateTime")])
    schemas = sorted((REPO / "schemas").glob("*.avsc"))
    records = [_record(json.loads(p.read_text())) for p in schemas]
    reasons: dict[str, list[str]] = {}
    for enum, where in ((RejectReason, "`streams.core.effects.RejectReason` (the decision core)"),
                        (ProcessorReject, "`streams.processor.model.ProcessorReject` (the "
                                          "processor, for records the core never sees)")):
        docs = attribute_docs(enum)
        for member in enum:
            if not docs.get(member.name):
                raise Undocumented(f"{enum.__name__}.{member.name} has no docstring: say "
                                   "what it means under the member")
            row = reasons.setdefault(member.value, [code(member.value), "", ""])
            row[1] = f"{row[1]} {docs[member.name]}".strip()
            row[2] = f"{row[2]}, {where}" if row[2] else where
    outcome_rows = _enum_rows(list(OutcomeReason))
    header_rows = [[code(name), one_line(doc)] for name, doc in headers.DOCUMENTED.items()]
    return (
        HEADER + "# Contract reference\n\n"
        "Every topic, record, field and reason of xwait's contract, generated from "
        "the code. What they mean together is in [the contract](../concepts/contract.md).\n\n"
        "## Topics\n\n"
        f"From `topology/topics.yaml`. `{{prefix}}` is `XWAIT_TOPIC_PREFIX` (default "
        f"`xwait`), `{{app}}` is `XWAIT_APP_ID` (default `{{prefix}}-processor`); every "
        f"topic has `XWAIT_PARTITIONS` partitions ({spec['partitions']} in the example).\n\n"
        + table(["topic", "what it holds", "kept", "timestamps"], topic_rows)
        + "\n## Records\n\n"
        "Inputs are accepted as Avro single-object encoding or as JSON of the same "
        "fields; outputs are Avro single-object encoding (the Confluent wire format "
        "with a Schema Registry). Fields are only ever added, never renamed; older "
        "versions of each schema are kept in `schemas/history/` and still read.\n\n"
        + "\n".join(records)
        + "\n## Outcome reasons\n\n"
        "`Outcome.reason`, from `streams.core.effects.OutcomeReason`.\n\n"
        + table(["reason", "meaning"], outcome_rows)
        + "\n## Rejection reasons\n\n"
        "`Rejected.reason`: every reason a worker publishes, from the enums of the "
        "code that emits it.\n\n"
        + table(["reason", "meaning", "named in"], [reasons[k] for k in sorted(reasons)])
        + "\n## Receipt verdicts\n\n"
        "`Receipt.verdict`, from `streams.core.receipts.Verdict`: what became of a reply "
        "(won, recorded, held, in_review, escalated, late, duplicate, tenant_mismatch, "
        "rejected) or a command (applied, held, unchanged, refused).\n\n"
        + table(["verdict", "meaning"], _enum_rows(list(Verdict)))
        + "\n## Headers\n\n"
        "Kafka record headers a worker reads and writes, from `streams.headers`; a "
        "record's other headers are neither read nor copied.\n\n"
        + table(["header", "meaning"], header_rows))
