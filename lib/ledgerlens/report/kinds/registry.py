"""The finding kinds' registry: one ``Kind`` declaration per kind, and the explainers by kind.

A declaration names everything a kind is spread over: its severity, its subject (the module of
``ledgerlens.report.kinds`` that declares it, as ``docs/audit-rules.md`` groups it), the module whose
rule emits it, its explainer and its section in ``docs/audit-rules.md``. ``declare`` registers it
and its explainer (``EXPLAINERS``); the audit's kind tables and the rules' severities are read from
the declarations (``ledgerlens.report.kinds``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ledgerlens.report.kinds.finding import AuditedWhere, Finding

RULES_DOC = "docs/audit-rules.md"
"""Where the rules live, relative to the repository root."""

Severity = Literal["critical", "warning", "info"]

Explainer = Callable[[Finding], tuple[str, str]]
"""A finding -> (reason, next step)."""


@dataclass(frozen=True)
class Explanation:
    """What a person needs to act on one finding."""

    reason: str
    next_step: str
    rule: str  # "docs/audit-rules.md#<kind>"

    @property
    def anchor(self) -> str:
        """The rule's anchor (``<kind>``) inside ``docs/audit-rules.md``."""
        return self.rule.rsplit("#", 1)[-1]


def rule_link(kind: str) -> str:
    """``docs/audit-rules.md#<kind>``: the rule's section (a ``### `<kind>` `` heading)."""
    return f"{RULES_DOC}#{kind}" if kind else RULES_DOC


@dataclass(frozen=True)
class Kind:
    """One finding kind, declared once.

    ``severity`` is the kind's severity; a rule whose rows may take another one (``also``: e.g.
    ``missing_offload_object`` is a warning while the BookKeeper copy still exists) keeps that row
    logic and names the other severity through ``Kind.other``; ``varies`` says when, in words.
    ``rule``: the module that emits the kind, relative to ``lib/ledgerlens`` (a test checks it names
    the kind).
    """

    name: str
    severity: Severity
    subject: str
    rule: str
    explain: Explainer = field(repr=False)
    also: tuple[Severity, ...] = ()
    varies: str = ""

    @property
    def anchor(self) -> str:
        """The kind's section in ``docs/audit-rules.md`` (``### `<kind>` ``)."""
        return self.name

    @property
    def doc(self) -> str:
        """``docs/audit-rules.md#<kind>``."""
        return rule_link(self.anchor)

    @property
    def severities(self) -> tuple[Severity, ...]:
        """Every severity a finding of this kind may have, its declared one first."""
        return (self.severity, *self.also)

    def other(self, severity: Severity) -> Severity:
        """``severity``, checked to be one this kind declares besides its own (``also``)."""
        if severity not in self.also:
            raise ValueError(f"{self.name}: severity {severity!r} is not declared (also={self.also})")
        return severity


# --- explainers by kind, with a generic fallback ---------------------------------------------------------


def _subject(f: Finding) -> str:
    parts = []
    if f.ledger_id is not None:
        parts.append(f"ledger {f.ledger_id}")
    if f.object_key:
        parts.append(f"object {f.object_key}")
    if f.cursor:
        parts.append(f"subscription {f.cursor}")
    if f.topic or f.managed_ledger:
        parts.append(f"of {f.owner}")
    if not parts and f.path:
        parts.append(f"node {f.path}")
    return " ".join(parts) or "the audited cluster"


def generic(f: Finding) -> tuple[str, str]:
    """The explanation of a kind without an explainer, from its evidence (``problem``/``reason``)."""
    problem = f.ev("problem") or f.ev("reason") or f.ev("error")
    kind = f.kind.replace("_", " ") or "finding"
    reason = f"{kind.capitalize()} on {_subject(f)}" + (f": {problem}." if problem else ".")
    look = f.path or f.object_key
    step = f"Read the rule ({rule_link(f.kind)}) and the evidence below"
    if look:
        step += f", then inspect {look}"
    return reason, step + "."


class Explainers:
    """The registry of explainers by finding kind (one instance: ``EXPLAINERS``)."""

    def __init__(self) -> None:
        self._by_kind: dict[str, Explainer] = {}

    def register(self, kind: str, fn: Explainer | None = None) -> Any:
        """Register ``fn`` for ``kind`` (usable as a decorator). A later registration replaces."""

        def add(f: Explainer) -> Explainer:
            self._by_kind[kind] = f
            return f

        return add(fn) if fn is not None else add

    def kinds(self) -> list[str]:
        """Every kind with its own explainer."""
        return sorted(self._by_kind)

    def __contains__(self, kind: object) -> bool:
        return kind in self._by_kind

    def explain(
        self, row: Mapping[str, Any], where: Mapping[str, Any] | AuditedWhere | None = None
    ) -> Explanation:
        """The explanation of one findings row; never raises (a broken explainer falls back)."""
        f = Finding(row, AuditedWhere.of(where))
        fn = self._by_kind.get(f.kind, generic)
        try:
            reason, step = fn(f)
        except Exception as e:  # noqa: BLE001 - an explanation must never break a report
            reason, step = generic(f)
            reason += f" (explainer failed: {type(e).__name__})"
        if not step.strip():
            step = generic(f)[1]
        return Explanation(reason=reason, next_step=step, rule=rule_link(f.kind))


EXPLAINERS = Explainers()

# --- the declarations ------------------------------------------------------------------------------------

DECLARED: dict[str, Kind] = {}
"""Kind name -> its declaration, in the order the subject modules declare them."""


def declare(kind: Kind) -> Kind:
    """Register ``kind`` and its explainer; a kind is declared once."""
    if kind.name in DECLARED:
        raise ValueError(f"finding kind {kind.name!r} is declared twice")
    if kind.severity in kind.also:
        raise ValueError(f"{kind.name}: also={kind.also} repeats its severity")
    DECLARED[kind.name] = kind
    EXPLAINERS.register(kind.name, kind.explain)
    return kind


@dataclass(frozen=True)
class Subject:
    """Kinds of one subject (``ledgers``, ``kafka``...: the module of ``ledgerlens.report.kinds`` that
    declares them) emitted by one rule module (relative to ``lib/ledgerlens``); ``declare`` declares one."""

    name: str
    rule: str

    def declare(
        self,
        name: str,
        severity: Severity,
        explain: Explainer,
        *,
        also: tuple[Severity, ...] = (),
        varies: str = "",
    ) -> Kind:
        """Declare kind ``name`` of this subject, emitted by its rule module."""
        return declare(Kind(name, severity, self.name, self.rule, explain, also=also, varies=varies))


def declared(name: str) -> Kind:
    """The declaration of finding kind ``name`` (KeyError for an undeclared kind)."""
    return DECLARED[name]


def severity_of(name: str) -> Severity:
    """The declared severity of finding kind ``name``."""
    return DECLARED[name].severity
