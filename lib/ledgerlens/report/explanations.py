"""Findings that explain themselves: a reason a person reads, the next step, the rule.

Every view of a finding (report, explorer, CLI summary) goes through ``explain``: it turns one
findings row (columns of ``ledgerlens.inventory.schemas.FINDINGS``) into an ``Explanation``:

- ``reason``: one sentence saying what was found and why it matters, with this finding's names;
- ``next_step``: what to run or check, as concrete commands with the names filled in
  (``pulsar-admin``, ``bookkeeper shell``, ``aws s3api``, ``ledgerlens``);
- ``rule``: the rule's section in ``docs/audit-rules.md`` (``docs/audit-rules.md#<kind>``).

The explainers live with their kinds' declarations in ``ledgerlens.report.kinds`` (one module per
subject; adding a kind is described there). A kind without an explainer still gets a generic
explanation built from its evidence (``problem``/``reason`` fields, path, object key). This module
keeps the entry points and the reading of ``docs/audit-rules.md``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ledgerlens.report.kinds import DECLARED, KAFKA, PULSAR, Kind, declared, severity_of
from ledgerlens.report.kinds.finding import AuditedWhere, Finding, parse_evidence, q
from ledgerlens.report.kinds.kafka import KAFKA_METADATA_FORMATTER
from ledgerlens.report.kinds.registry import (
    EXPLAINERS,
    RULES_DOC,
    Explainer,
    Explainers,
    Explanation,
    generic,
    rule_link,
)

__all__ = [
    "DECLARED",
    "EXPLAINERS",
    "KAFKA",
    "KAFKA_METADATA_FORMATTER",
    "PULSAR",
    "RULES_DOC",
    "RULE_FILE_PREFIX",
    "AuditedWhere",
    "Explainer",
    "Explainers",
    "Explanation",
    "Finding",
    "Kind",
    "declared",
    "explain",
    "explain_rows",
    "generic",
    "parse_evidence",
    "q",
    "rule_link",
    "rule_sections",
    "rules_doc_path",
    "severity_of",
]


def explain(row: Mapping[str, Any], where: Mapping[str, Any] | AuditedWhere | None = None) -> Explanation:
    """The explanation of one findings row (see ``Explainers.explain``)."""
    return EXPLAINERS.explain(row, where)


def explain_rows(
    rows: Iterator[Mapping[str, Any]] | list[Mapping[str, Any]],
    where: Mapping[str, Any] | AuditedWhere | None = None,
) -> list[Explanation]:
    """Explanations of many rows (same order)."""
    w = AuditedWhere.of(where)
    return [EXPLAINERS.explain(r, w) for r in rows]


# --- the rules' sections in docs/audit-rules.md ----------------------------------------------------------


def rules_doc_path() -> Path | None:
    """``docs/audit-rules.md`` of this checkout, when present (not in a wheel install)."""
    p = Path(__file__).resolve().parents[3] / RULES_DOC
    return p if p.is_file() else None


RULE_FILE_PREFIX = "Rule: [`"  # a kind's section names the module that emits it


def rule_sections(text: str | None = None) -> dict[str, str]:
    """Kind -> the markdown body of its ``### `<kind>` `` section in ``docs/audit-rules.md``, without
    its ``Rule: [...]`` line (a link into the source tree, which a report cannot follow)."""
    if text is None:
        p = rules_doc_path()
        if p is None:
            return {}
        text = p.read_text(encoding="utf-8")
    out: dict[str, str] = {}
    kind: str | None = None
    body: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            if kind is not None:
                out[kind] = "\n".join(body).strip()
            kind, body = None, []
            head = line.lstrip("#").strip()
            if line.startswith("### ") and head.startswith("`") and head.endswith("`"):
                kind = head.strip("`")
            continue
        if kind is not None and not line.startswith(RULE_FILE_PREFIX):
            body.append(line)
    if kind is not None:
        out[kind] = "\n".join(body).strip()
    return out
