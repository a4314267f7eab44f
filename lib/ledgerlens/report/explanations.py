"""Findings that explain themselves: a reason a person reads, the next step, the rule.

Every view of a finding (report, explorer, CLI summary) goes through ``explain``: it turns one
findings row (columns of ``ledgerlens.inventory.schemas.FINDINGS``) into an ``Explanation``:

- ``reason``: one sentence saying what was found and why it matters, with this finding's names;
- ``next_step``: what to run or check, as concrete commands with the names filled in
  (``pulsar-admin``, ``bookkeeper shell``, ``aws s3api``, ``ledgerlens``);
- ``rule``: the rule's section in ``docs/audit-rules.md`` (``docs/audit-rules.md#<kind>``).

Adding a finding kind: register an explainer next to the rule that emits it::

    from ledgerlens.report.explanations import EXPLAINERS, Finding

    @EXPLAINERS.register("foreign_ledger")
    def _foreign_ledger(f: Finding) -> tuple[str, str]:
        return (f"Ledger {f.ledger_id} belongs to another cluster ...", f"bookkeeper shell ...")

and a ``### `foreign_ledger` `` section to ``docs/audit-rules.md`` (a test checks every kind in
``ledgerlens.audit.findings.KINDS`` has both). A kind without an explainer still gets a generic
explanation built from its evidence (``problem``/``reason`` fields, path, object key).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledgerlens.report.text import human_bytes, human_duration, human_time, is_missing

RULES_DOC = "docs/audit-rules.md"
"""Where the rules live, relative to the repository root."""


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


@dataclass(frozen=True)
class AuditedWhere:
    """Addresses of what was audited, to fill into commands (never credentials)."""

    zookeeper: str = ""
    bucket: str = ""
    s3_endpoint: str = ""
    kafka: str = ""  # Kafka bootstrap servers (kafka-audit)

    @classmethod
    def of(cls, context: Mapping[str, Any] | AuditedWhere | None) -> AuditedWhere:
        if isinstance(context, AuditedWhere):
            return context
        c = dict(context or {})
        return cls(
            zookeeper=str(c.get("zookeeper") or ""),
            bucket=str(c.get("bucket") or ""),
            s3_endpoint=str(c.get("s3_endpoint") or ""),
            kafka=str(c.get("bootstrap_servers") or c.get("kafka") or ""),
        )


def _value(row: Mapping[str, Any], name: str) -> Any:
    v = row.get(name)
    return None if is_missing(v) else v


def q(value: object) -> str:
    """Shell-quote a name for a command line (topic names may hold spaces and quotes)."""
    return shlex.quote(str(value))


@dataclass(frozen=True)
class Finding:
    """A read-only view of one findings row, with the names explainers need."""

    row: Mapping[str, Any]
    where: AuditedWhere = field(default_factory=AuditedWhere)

    def get(self, name: str) -> Any:
        """A column's value; None when null/NaN."""
        return _value(self.row, name)

    @property
    def kind(self) -> str:
        return str(self.get("kind") or "")

    @property
    def severity(self) -> str:
        return str(self.get("severity") or "")

    @property
    def ledger_id(self) -> int | None:
        v = self.get("ledger_id")
        return None if v is None else int(v)

    @property
    def managed_ledger(self) -> str | None:
        v = self.get("managed_ledger") or self.ev("managed_ledger")
        return None if v is None else str(v)

    @property
    def cursor(self) -> str | None:
        v = self.get("cursor") or self.ev("cursor")
        return None if v is None else str(v)

    @property
    def path(self) -> str | None:
        v = self.get("path")
        return None if v is None else str(v)

    @property
    def object_key(self) -> str | None:
        v = self.get("object_key")
        return None if v is None else str(v)

    @property
    def bytes(self) -> int | None:
        v = self.get("bytes")
        return None if v is None else int(v)

    @property
    def size(self) -> str:
        """Human size, or ``'size unknown'``."""
        return human_bytes(self.bytes) if self.bytes is not None else "size unknown"

    @property
    def age(self) -> str:
        """Human age (``'3.0 d'``), or ``''``."""
        return human_duration(self.get("age_seconds"))

    @property
    def evidence(self) -> dict[str, Any]:
        """The evidence JSON as a dict (``{}`` when absent or not JSON)."""
        return parse_evidence(self.get("evidence"))

    def ev(self, name: str, default: Any = None) -> Any:
        """One evidence field (None/NaN -> ``default``)."""
        v = self.evidence.get(name)
        return default if v is None or is_missing(v) else v

    @property
    def topic(self) -> str | None:
        """``persistent://tenant/ns/topic`` of the managed ledger, when it parses."""
        ml = self.managed_ledger
        if not ml:
            return None
        from ledgerlens.formats.names import parse_managed_ledger

        try:
            return parse_managed_ledger(ml).topic
        except Exception:  # noqa: BLE001 - a name that does not parse is shown as it is
            return None

    @property
    def namespace(self) -> str | None:
        v = self.get("namespace")
        return None if v is None else str(v)

    @property
    def owner(self) -> str:
        """The topic, else the managed-ledger name, else ``'an unknown owner'``."""
        return self.topic or self.managed_ledger or "an unknown owner"

    @property
    def bucket(self) -> str:
        return str(self.ev("bucket") or self.where.bucket or "BUCKET")

    @property
    def zk(self) -> str:
        """The audited ZooKeeper connect string (``ZK`` when unknown)."""
        return self.where.zookeeper or "ZK"

    def s3api(self, op: str, key: str) -> str:
        """``aws s3api <op> --bucket B --key K`` (with ``--endpoint-url`` for a non-AWS endpoint)."""
        endpoint = f" --endpoint-url {q(self.where.s3_endpoint)}" if self.where.s3_endpoint else ""
        return f"aws s3api {op}{endpoint} --bucket {q(self.bucket)} --key {q(key)}"


def parse_evidence(value: Any) -> dict[str, Any]:
    """Evidence (a JSON object string, a dict or null) as a dict."""
    if value is None or is_missing(value):
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        parsed = json.loads(str(value))
    except ValueError:
        return {"evidence": str(value)}
    return dict(parsed) if isinstance(parsed, dict) else {"evidence": parsed}


Explainer = Callable[[Finding], tuple[str, str]]
"""A finding -> (reason, next step)."""


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
        fn = self._by_kind.get(f.kind, _generic)
        try:
            reason, step = fn(f)
        except Exception as e:  # noqa: BLE001 - an explanation must never break a report
            reason, step = _generic(f)
            reason += f" (explainer failed: {type(e).__name__})"
        if not step.strip():
            step = _generic(f)[1]
        return Explanation(reason=reason, next_step=step, rule=rule_link(f.kind))


EXPLAINERS = Explainers()


def rule_link(kind: str) -> str:
    """``docs/audit-rules.md#<kind>``: the rule's section (a ``### `<kind>` `` heading)."""
    return f"{RULES_DOC}#{kind}" if kind else RULES_DOC


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


# --- generic fallback ---------------------------------------------------------------------------------


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


def _generic(f: Finding) -> tuple[str, str]:
    problem = f.ev("problem") or f.ev("reason") or f.ev("error")
    kind = f.kind.replace("_", " ") or "finding"
    reason = f"{kind.capitalize()} on {_subject(f)}" + (f": {problem}." if problem else ".")
    look = f.path or f.object_key
    step = f"Read the rule ({rule_link(f.kind)}) and the evidence below"
    if look:
        step += f", then inspect {look}"
    return reason, step + "."


# --- explainers of the audit's kinds ---------------------------------------------------------------------


def _ledger_meta(f: Finding) -> str:
    return f"bookkeeper shell ledgermetadata -ledgerid {f.ledger_id}"


def _info_internal(f: Finding) -> str:
    return f"pulsar-admin topics info-internal {q(f.topic)}" if f.topic else ""


def _lines(*cmds: str) -> str:
    return "\n".join(c for c in cmds if c)


_OWNER_WORDS = {
    "managed-ledger": "data ledger",
    "cursor": "cursor ledger",
    "schema": "schema ledger",
    "compacted-ledger": "compacted ledger",
    "delayed-index-bucket": "delayed-delivery bucket ledger",
}


@EXPLAINERS.register("orphan_ledger")
def _orphan_ledger(f: Finding) -> tuple[str, str]:
    what = _OWNER_WORDS.get(str(f.get("component") or f.ev("component") or ""), "ledger")
    owner = f.owner
    sub = f" (subscription {f.cursor})" if f.cursor else ""
    schema = f.ev("schema_id")
    if f.ev("owner_exists") is False:
        gone = f"{owner} no longer exists"
    else:
        gone = f"{owner}{sub} no longer references it"
    if schema and not f.managed_ledger:
        gone = f"schema {schema} no longer references it"
    age = f", created {f.age} ago" if f.age else ""
    reason = f"BookKeeper {what} {f.ledger_id} ({f.size}{age}) was written for {owner}{sub}, but {gone}."
    if f.ev("owner_emptied"):
        node = f.ev("owner_node") or owner
        reason += (
            f" Its owner's node {node} was emptied (0 bytes, rewritten): suspicious metadata, "
            "not proof of an orphan."
        )
        return reason, _lines(
            f"Restore {node} (backup, or the broker's view: {_info_internal(f)})" if f.topic else "",
            f"Restore {node} from a backup" if not f.topic else "",
            "Do not delete this ledger until the node is explained (see emptied_managed_ledger).",
        )
    step = _lines(
        "Confirm nothing references it any more:",
        f"  {_ledger_meta(f)}",
        f"  {_info_internal(f)}" if f.topic else "",
        "Reclaim it through an approved deletion plan (ledgerlens never deletes from a report);",
        f"by hand: bookkeeper shell deleteledger -ledgerid {f.ledger_id}",
    )
    return reason, step


@EXPLAINERS.register("unattributed_ledger")
def _unattributed_ledger(f: Finding) -> tuple[str, str]:
    app = f.ev("application")
    who = f"application {app!r}" if app else "no Pulsar custom metadata"
    age = f", created {f.age} ago" if f.age else ""
    reason = (
        f"Ledger {f.ledger_id} ({f.size}{age}) has {who} and nothing in Pulsar references it: "
        "it may belong to another BookKeeper client or an old Pulsar version."
    )
    step = _lines(
        f"Find its owner from its metadata (ensemble, ctime, custom metadata): {_ledger_meta(f)}",
        "Never delete it on this report's word: ledgerlens cannot prove whose it is.",
    )
    return reason, step


@EXPLAINERS.register("missing_ledger")
def _missing_ledger(f: Finding) -> tuple[str, str]:
    ref = f.ev("reference") or str(f.get("component") or "")
    by = f.ev("referenced_by") or f.path or f.owner
    what = {
        "cursor": f"the cursor of subscription {f.cursor} on {f.owner}",
        "schema": f"schema {f.ev('schema_id') or ''} version {f.ev('schema_version', '?')}",
        "compacted-ledger": f"the compaction state of {f.owner}",
        "delayed-index-bucket": f"a delayed-delivery bucket of {f.owner}",
    }.get(str(ref), f"{f.owner}")
    reason = (
        f"Ledger {f.ledger_id}, referenced by {what} (node {by}), does not exist in BookKeeper and "
        "is not offloaded: its data is lost."
    )
    steps = [
        f"Confirm it is gone: {_ledger_meta(f)}   (expect: ledger does not exist)",
        f"See what the topic holds: {_info_internal(f)}" if f.topic else "",
    ]
    if ref == "schema":
        steps.append(
            f"Schema readers fail on this version: pulsar-admin schemas get {q(f.topic)} --version "
            f"{f.ev('schema_version', 'N')}"
            if f.topic
            else ""
        )
    elif ref == "cursor":
        steps.append(
            f"The subscription's position is lost; after telling its owner, reset it: pulsar-admin "
            f"topics reset-cursor {q(f.topic)} -s {q(f.cursor)} --time 0"
            if f.topic and f.cursor
            else ""
        )
    else:
        steps.append(
            "Consumers stop at this ledger unless the broker runs with autoSkipNonRecoverableData=true; "
            "restore from backup if one exists, else tell the topic's owners what was lost."
        )
    return reason, _lines(*steps)


@EXPLAINERS.register("orphan_offload_object")
def _orphan_offload_object(f: Finding) -> tuple[str, str]:
    key = f.object_key or "KEY"
    lid = f.ev("ledger_id")
    of = f" of ledger {lid}" if lid is not None else ""
    age = f", last modified {f.age} ago" if f.age else ""
    reason = (
        f"Offloaded {f.ev('role') or 'data'} object {key}{of} ({f.size}{age}) in bucket {f.bucket} "
        f"belongs to no offload of any topic (offload uuid {f.ev('uuid') or '?'} is referenced nowhere)."
    )
    step = _lines(
        "See which topic wrote it (user metadata ManagedLedgerName):",
        f"  {f.s3api('head-object', key)}",
        "Reclaim it through an approved deletion plan; by hand:",
        f"  {f.s3api('delete-object', key)}",
    )
    return reason, step


@EXPLAINERS.register("missing_offload_object")
def _missing_offload_object(f: Finding) -> tuple[str, str]:
    key = f.object_key or "KEY"
    lost = f.severity == "critical"
    tail = (
        "and the BookKeeper copy is deleted: the data is lost"
        if lost
        else "but the BookKeeper copy still exists: the data is safe until the broker deletes it"
    )
    reason = (
        f"{f.owner} says ledger {f.ledger_id} is offloaded (uuid {f.ev('uuid') or '?'}), but its "
        f"{f.ev('role') or 'data'} object {key} is absent from bucket {f.bucket}, {tail}."
    )
    steps = [f"Confirm: {f.s3api('head-object', key)}"]
    ns = f.namespace
    if lost:
        steps.append(
            "Check the bucket's lifecycle rules and versioning (restore a previous version if versioned): "
            f"aws s3api list-object-versions --bucket {q(f.bucket)} --prefix {q(key)}"
        )
    elif ns:
        steps.append(
            "Keep the BookKeeper copy while you find out who deleted the object: "
            f"pulsar-admin namespaces set-offload-deletion-lag {q(ns)} --lag 3650d"
        )
    return reason, _lines(*steps)


@EXPLAINERS.register("incomplete_offload")
def _incomplete_offload(f: Finding) -> tuple[str, str]:
    keys = f.ev("keys") or ([f.object_key] if f.object_key else [])
    newest = f.ev("newest_last_modified_ms")
    when = f", the newest written {human_time(newest)}" if newest else ""
    reason = (
        f"The offload of ledger {f.ledger_id} of {f.owner} (uuid {f.ev('uuid') or '?'}) never completed "
        f"and left {len(keys)} object(s) ({f.size}) in bucket {f.bucket}{when}."
    )
    steps = [
        f"Is an offload still running? pulsar-admin topics offload-status {q(f.topic)}" if f.topic else "",
        f"Compare the uuid with the ledger's current offload: {_info_internal(f)}" if f.topic else "",
        "If no offload runs and the uuid is not the current one, the objects are garbage:",
        *[f"  {f.s3api('head-object', str(k))}" for k in keys[:4]],
    ]
    return reason, _lines(*steps)


@EXPLAINERS.register("offloaded_not_deleted")
def _offloaded_not_deleted(f: Finding) -> tuple[str, str]:
    lag = f.ev("offload_deletion_lag_ms")
    lag_s = f" (offload deletion lag {human_duration(lag / 1000)})" if lag else ""
    reason = (
        f"Ledger {f.ledger_id} of {f.owner} is offloaded, but its BookKeeper copy ({f.size}) is still "
        f"kept past the offload deletion lag{lag_s}: the broker deletes it only while the topic is loaded."
    )
    step = _lines(
        f"Load and trim the topic: pulsar-admin topics trim-topic {q(f.topic)}" if f.topic else "",
        f"Check afterwards: {_ledger_meta(f)}   (expect: ledger does not exist)",
    )
    return reason, step


@EXPLAINERS.register("retention_overdue")
def _retention_overdue(f: Finding) -> tuple[str, str]:
    minutes, mb = f.ev("retention_minutes"), f.ev("retention_mb")
    limits = []
    if minutes is not None and minutes >= 0:
        limits.append(human_duration(minutes * 60))
    if mb is not None and mb >= 0:
        limits.append(human_bytes(mb * 1024 * 1024))
    limit = " / ".join(limits) or "the namespace retention"
    age = f", {f.age} old" if f.age else ""
    reason = (
        f"Ledger {f.ledger_id} of {f.owner} ({f.size}{age}) is consumed by every subscription and past "
        f"the retention of {f.namespace or 'its namespace'} ({limit}), yet still kept: the topic is not "
        "loaded, so no broker trims it."
    )
    step = _lines(
        f"Trim it: pulsar-admin topics trim-topic {q(f.topic)}" if f.topic else "",
        f"Check the retention: pulsar-admin namespaces get-retention {q(f.namespace)}" if f.namespace else "",
    )
    return reason, step


@EXPLAINERS.register("open_ledger_overdue")
def _open_ledger_overdue(f: Finding) -> tuple[str, str]:
    limit = f.ev("open_ledger_max_age_s")
    lim = f" (limit {human_duration(limit)})" if limit else ""
    reason = (
        f"Ledger {f.ledger_id}, the current ledger of {f.owner}, has been OPEN for {f.age or 'long'}{lim}: "
        "its broker may have died without closing it, or the topic has not rolled over."
    )
    step = _lines(
        f"Check the topic's state: pulsar-admin topics stats-internal {q(f.topic)}" if f.topic else "",
        f"Check the ledger: {_ledger_meta(f)}",
        f"Unloading the topic closes and recovers it: pulsar-admin topics unload {q(f.topic)}"
        if f.topic
        else "",
    )
    return reason, step


@EXPLAINERS.register("inactive_cursor")
def _inactive_cursor(f: Finding) -> tuple[str, str]:
    held = f.ev("held_ledgers")
    first, last = f.ev("first_held_ledger_id"), f.ev("last_held_ledger_id")
    span = f" (ledgers {first} to {last})" if first is not None and last is not None else ""
    n = f"{held} ledger(s)" if held is not None else "ledgers"
    reason = (
        f"Subscription {f.cursor} on {f.owner} has been inactive for {f.age or 'long'} and holds "
        f"{n}{span}, {f.size}, back from retention."
    )
    t, s = q(f.topic or "TOPIC"), q(f.cursor or "SUBSCRIPTION")
    step = _lines(
        f"See its backlog: pulsar-admin topics stats {t}",
        "Ask its owner whether it is still needed; if not:",
        f"  pulsar-admin topics unsubscribe {t} -s {s}",
        f"or drop only its backlog: pulsar-admin topics skip-all {t} -s {s}",
    )
    return reason, step


_TABLE_WORDS = {
    "bk_ledgers": "BookKeeper ledger metadata",
    "managed_ledgers": "managed-ledger metadata",
    "cursors": "cursor metadata",
    "schema_ledgers": "schema locator",
    "namespace_policies": "namespace policies",
}


@EXPLAINERS.register("corrupt_metadata")
def _corrupt_metadata(f: Finding) -> tuple[str, str]:
    if f.get("component") == "kafka-remote" or f.ev("metadata_topic"):
        return _kafka_corrupt_record(f)
    table = str(f.ev("table") or "")
    problem = str(f.ev("problem") or "unknown problem")
    what = _TABLE_WORDS.get(table, "metadata")
    node = f.path or "an unnamed node"
    if problem.startswith(f"{node}: "):  # decoders name the node; the sentence already does
        problem = problem[len(node) + 2 :]
    reason = f"The {what} node {node} cannot be used: {problem}."
    low = problem.lower()
    shell = f"pulsar zookeeper-shell -server {q(f.zk)}"
    steps = [f"Read it: {shell} get {q(node)}"]
    if "noauth" in low or "auth" in low or "acl" in low:
        steps = [
            f"The audit's ZooKeeper identity may not read it: {shell} getAcl {q(node)}",
            "Grant that identity read access (or run the audit with credentials that have it).",
        ]
    elif "version" in low and ("support" in low or "unknown" in low):
        steps.append("Written in a format this ledgerlens does not read: check the writer's version.")
    elif table == "bk_ledgers" and f.ledger_id is not None:
        steps.append(f"Compare with BookKeeper's own reading: {_ledger_meta(f)}")
    elif f.topic:
        steps.append(f"Compare with the broker's reading: {_info_internal(f)}")
    steps.append("Until it decodes, nothing it may reference is ever reported as an orphan.")
    return reason, _lines(*steps)


@EXPLAINERS.register("unreadable_metadata")
def _unreadable_metadata(f: Finding) -> tuple[str, str]:
    node = f.path or "an unnamed node"
    reason = (
        f"ZooKeeper denied the audit reading {node} (NoAuth): the audit is blind there, so nothing "
        "it may reference can be judged."
    )
    shell = f"pulsar zookeeper-shell -server {q(f.zk)}"
    return reason, _lines(
        f"See who may read it: {shell} getAcl {q(node)}",
        "Configure ZooKeeper authentication for ledgerlens (digest or SASL credentials and TLS in the "
        "context file or the environment, never command-line parameters) and audit again.",
    )


@EXPLAINERS.register("emptied_managed_ledger")
def _emptied_managed_ledger(f: Finding) -> tuple[str, str]:
    node = f.path or "its node"
    n = f.ev("owned_ledgers")
    version = f.ev("znode_version")
    reason = (
        f"The managed-ledger node {node} lists no ledger although it was rewritten (znode version "
        f"{version}, 0 bytes) while {n} older ledger(s) ({f.size}) still name it as their owner: "
        "probably a bad edit."
    )
    shell = f"pulsar zookeeper-shell -server {q(f.zk)}"
    return reason, _lines(
        f"Look at it: {shell} stat {q(node)}",
        f"Compare with the broker's view: {_info_internal(f)}" if f.topic else "",
        "Restore the node from a backup before anything it owned is deleted; its ledgers' "
        "orphan_ledger findings carry this caveat and the action investigate.",
    )


@EXPLAINERS.register("foreign_ledger")
def _foreign_ledger(f: Finding) -> tuple[str, str]:
    tenant = f.ev("tenant") or f.get("tenant") or "an unknown tenant"
    why = f.ev("reason")
    reason = (
        f"Ledger {f.ledger_id} ({f.size}) belongs to {tenant}, a tenant this cluster does not own: "
        f"another Pulsar cluster sharing these bookies may still use it" + (f" ({why})." if why else ".")
    )
    step = _lines(
        f"See its metadata: {_ledger_meta(f)}",
        "Audit the cluster that owns the tenant (--pulsar-metadata lists every store sharing BookKeeper);",
        "if the tenant was deleted, audit again with --deleted-tenant TENANT. Never delete it from here.",
    )
    return reason, step


@EXPLAINERS.register("foreign_offload_object")
def _foreign_offload_object(f: Finding) -> tuple[str, str]:
    key = f.object_key or "KEY"
    tenant = f.ev("tenant") or f.get("tenant") or "another cluster"
    reason = (
        f"Object {key} ({f.size}) in bucket {f.bucket} was offloaded for {tenant}, which this cluster "
        "does not own: another cluster offloads into the same bucket."
    )
    step = _lines(
        f"See who wrote it (ManagedLedgerName, cluster): {f.s3api('head-object', key)}",
        "Audit the owning cluster against this bucket; never delete it from this report.",
    )
    return reason, step


@EXPLAINERS.register("corrupt_offload_object")
def _corrupt_offload_object(f: Finding) -> tuple[str, str]:
    key = f.object_key or "KEY"
    problem = f.ev("problem") or f.ev("error") or "does not decode"
    reason = f"Offloaded object {key} in bucket {f.bucket} cannot be read back: {problem}."
    step = _lines(
        f"Look at it: {f.s3api('head-object', key)}",
        f"Is it still in BookKeeper? {_ledger_meta(f)}" if f.ledger_id is not None else "",
        "While BookKeeper has it, keep it (raise the namespace's offload deletion lag) and re-offload.",
    )
    return reason, step


# --- Kafka tiered storage (KIP-405): remote_segment_* ------------------------------------------------------

KAFKA_METADATA_FORMATTER = (
    "org.apache.kafka.server.log.remote.metadata.storage.serialization."
    "RemoteLogMetadataSerde$RemoteLogMetadataFormatter"
)
"""Kafka's console-consumer formatter that prints ``__remote_log_metadata`` records."""


def _kafka_bootstrap(f: Finding) -> str:
    return f.where.kafka or "BOOTSTRAP"


def _kafka_topic(f: Finding) -> str:
    return str(f.ev("topic") or "TOPIC")


def _kafka_partition(f: Finding) -> str:
    """``topic-partition`` (``TOPIC-P`` when unknown)."""
    p = f.ev("partition")
    return f"{_kafka_topic(f)}-{p if p is not None else 'P'}"


def _kafka_segment(f: Finding) -> str:
    """``segment <id> of <topic>-<partition> (offsets a to b)``."""
    seg = f.ev("segment_id") or "?"
    start, end = f.ev("start_offset"), f.ev("end_offset")
    span = f" (offsets {start} to {end})" if start is not None and end is not None else ""
    if start is not None and end is None:
        span = f" (from offset {start})"
    return f"segment {seg} of {_kafka_partition(f)}{span}"


def _kafka_store(f: Finding) -> str:
    """``s3://bucket/prefix`` or ``file:///root`` of the segment files."""
    store = str(f.ev("store") or "")
    if store:
        return store
    return f"s3://{f.where.bucket}/" if f.where.bucket else "the remote storage"


def _kafka_object(f: Finding, op: str, key: str | None = None) -> str:
    """The command that looks at (``head``) or deletes (``delete``) one segment file."""
    key = key or f.object_key or "KEY"
    store = _kafka_store(f)
    if store.startswith("file://"):
        path = q(str(Path(store[len("file://") :]) / key))
        return f"ls -l {path}" if op == "head" else f"rm {path}"
    bucket = store[len("s3://") :].split("/", 1)[0] if store.startswith("s3://") else f.bucket
    endpoint = f" --endpoint-url {q(f.where.s3_endpoint)}" if f.where.s3_endpoint else ""
    verb = "head-object" if op == "head" else "delete-object"
    return f"aws s3api {verb}{endpoint} --bucket {q(bucket or 'BUCKET')} --key {q(key)}"


def _kafka_describe(f: Finding) -> str:
    return (
        f"kafka-topics.sh --bootstrap-server {q(_kafka_bootstrap(f))} --describe --topic {q(_kafka_topic(f))}"
    )


def _kafka_configs(f: Finding, topic: str | None = None) -> str:
    return (
        f"kafka-configs.sh --bootstrap-server {q(_kafka_bootstrap(f))} --entity-type topics "
        f"--entity-name {q(topic or _kafka_topic(f))} --describe --all"
    )


def _kafka_record(f: Finding) -> str:
    """The console-consumer command printing the metadata record of this finding."""
    part, off = f.ev("metadata_partition"), f.ev("metadata_offset")
    topic = str(f.ev("metadata_topic") or "__remote_log_metadata")
    return (
        f"kafka-console-consumer.sh --bootstrap-server {q(_kafka_bootstrap(f))} --topic {q(topic)} "
        f"--partition {part if part is not None else 'P'} --offset {off if off is not None else 'O'} "
        f"--max-messages 1 --formatter {q(KAFKA_METADATA_FORMATTER)}"
    )


def _kafka_rerun(f: Finding) -> str:
    return f"ledgerlens kafka-audit --bootstrap-servers {q(_kafka_bootstrap(f))} ... (same storage flags)"


def _kafka_file(f: Finding) -> str:
    role = f.ev("role")
    return f"{role} file" if role else "file"


@EXPLAINERS.register("remote_segment_orphan_object")
def _remote_orphan(f: Finding) -> tuple[str, str]:
    why = f.ev("reason") or "no segment metadata record names its segment"
    age = f", last modified {f.age} ago" if f.age else ""
    reason = (
        f"Remote {_kafka_file(f)} {f.object_key or '?'} ({f.size}{age}) of {_kafka_segment(f)} in "
        f"{_kafka_store(f)} belongs to no live segment of the topic: {why}."
    )
    blind = f.ev("corrupt_metadata_records") or 0
    steps = [
        f"Look at it: {_kafka_object(f, 'head')}",
        f"Check the topic still exists with topic id {f.ev('topic_id') or '?'}: {_kafka_describe(f)}",
    ]
    if blind:
        steps.append(
            f"{blind} corrupt metadata record(s) may name this segment: fix them (corrupt_metadata findings) "
            "and audit again before deleting anything."
        )
    else:
        steps += [
            "Kafka never reads it again: reclaim it through an approved deletion plan",
            "  ledgerlens plan --findings DIR --kinds remote_segment_orphan_object --out plan.json",
            f"by hand, once confirmed: {_kafka_object(f, 'delete')}",
        ]
    return reason, _lines(*steps)


@EXPLAINERS.register("remote_segment_foreign_object")
def _remote_foreign(f: Finding) -> tuple[str, str]:
    age = f", last modified {f.age} ago" if f.age else ""
    reason = (
        f"Remote {_kafka_file(f)} {f.object_key or '?'} ({f.size}{age}) in {_kafka_store(f)} is of topic id "
        f"{f.ev('topic_id') or '?'}, which neither this cluster's metadata nor its topics know: another "
        "cluster writes to the same storage, or the topic's metadata was removed."
    )
    step = _lines(
        f"Look at it: {_kafka_object(f, 'head')}",
        f"Is {_kafka_topic(f)} a topic of another Kafka cluster using this storage? Audit that cluster "
        "with ledgerlens kafka-audit against the same bucket or directory.",
        "Never delete it on this report's word: ledgerlens cannot prove whose it is.",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_deleted_partition_object")
def _remote_deleted_partition(f: Finding) -> tuple[str, str]:
    why = f.ev("reason") or "its topic or partition was deleted"
    reason = (
        f"Remote {_kafka_file(f)} {f.object_key or '?'} ({f.size}) of {_kafka_segment(f)} is still in "
        f"{_kafka_store(f)} although {why}."
    )
    steps = [
        f"Confirm the topic is gone (expect UnknownTopicOrPartitionException): {_kafka_describe(f)}",
        f"Look at it: {_kafka_object(f, 'head')}",
    ]
    if f.get("action") == "delete_object":
        steps += [
            "Reclaim it through an approved deletion plan: ledgerlens plan --findings DIR --kinds "
            "remote_segment_deleted_partition_object --out plan.json",
            f"by hand, once confirmed: {_kafka_object(f, 'delete')}",
        ]
    else:
        steps.append(
            "Its segment still has live metadata (or a metadata record is corrupt): wait for the broker's "
            "deletion and audit again before deleting by hand."
        )
    return reason, _lines(*steps)


@EXPLAINERS.register("remote_segment_missing_object")
def _remote_missing(f: Finding) -> tuple[str, str]:
    missing = f.ev("missing_roles") or []
    what = ", ".join(str(r) for r in missing) or "required"
    reason = (
        f"The metadata says {_kafka_segment(f)} ({f.size}) is copied to remote storage "
        f"(COPY_SEGMENT_FINISHED), but its {what} file(s) are absent from {_kafka_store(f)}: consumers "
        "reading these offsets from remote storage fail."
    )
    steps = [f"Confirm: {_kafka_object(f, 'head')}"]
    store = _kafka_store(f)
    if store.startswith("s3://"):
        bucket = store[len("s3://") :].split("/", 1)[0]
        steps.append(
            "Check the bucket's lifecycle rules and versioning (restore a previous version if versioned): "
            f"aws s3api get-bucket-lifecycle-configuration --bucket {q(bucket)}"
        )
    steps += [
        f"Does the leader still hold these offsets locally? {_kafka_describe(f)}",
        "If not, the offsets are lost: tell the topic's consumers before the broker deletes the segment.",
    ]
    return reason, _lines(*steps)


@EXPLAINERS.register("remote_segment_stuck_copy")
def _remote_stuck_copy(f: Finding) -> tuple[str, str]:
    limit = f.ev("threshold_s")
    lim = f" (limit {human_duration(limit)})" if limit else ""
    reason = (
        f"The upload of {_kafka_segment(f)} started {f.age or 'long'} ago and never finished "
        f"(COPY_SEGMENT_STARTED{lim}); {f.size} of its files sit in {_kafka_store(f)}."
    )
    step = _lines(
        f"Find the partition's leader (then its log: RemoteLogManager copy errors): {_kafka_describe(f)}",
        f"See the record that started it: {_kafka_record(f)}",
        "Check the remote storage is reachable and writable from that broker; the files stay while the "
        "metadata names the segment (never delete them by hand).",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_stuck_delete")
def _remote_stuck_delete(f: Finding) -> tuple[str, str]:
    limit = f.ev("threshold_s")
    lim = f" (limit {human_duration(limit)})" if limit else ""
    reason = (
        f"The deletion of {_kafka_segment(f)} started {f.age or 'long'} ago and never finished "
        f"(DELETE_SEGMENT_STARTED{lim}); {f.size} of its files are still in {_kafka_store(f)}."
    )
    step = _lines(
        f"Find the partition's leader (then its log: RemoteLogManager delete errors): {_kafka_describe(f)}",
        f"See the record that started it: {_kafka_record(f)}",
        f"Check the broker may delete from the storage: {_kafka_object(f, 'head')}",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_retention_overdue")
def _remote_retention(f: Finding) -> tuple[str, str]:
    ms = f.ev("retention_ms")
    ret = f"retention.ms {human_duration(ms / 1000)}" if isinstance(ms, int | float) else "its retention"
    reason = (
        f"Remote {_kafka_segment(f)} ({f.size}) holds records {f.age or 'long'} old, past the topic's "
        f"{ret} plus the grace: the broker should have deleted it."
    )
    step = _lines(
        f"Check the topic's retention and remote settings: {_kafka_configs(f)}",
        f"Find the partition's leader (then its log: RemoteLogManager expiration): {_kafka_describe(f)}",
        "Retention by size (retention.bytes) is not judged here: it may keep the segment on purpose.",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_overlap")
def _remote_overlap(f: Finding) -> tuple[str, str]:
    other = f.ev("overlaps_segment") or "?"
    reason = (
        f"Remote {_kafka_segment(f)} overlaps segment {other} (which ends at offset "
        f"{f.ev('overlaps_end_offset', '?')}) with a different leader-epoch chain: the partition's history "
        "diverged (an unclean leader election), which can stop remote deletion in this partition."
    )
    step = _lines(
        f"See both segments' records: {_kafka_record(f)}",
        f"Check whether unclean leader election is enabled: {_kafka_configs(f)}",
        "Compare the leader epochs in the evidence; keep both segments until the topic's owner decides.",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_illegal_transition")
def _remote_illegal(f: Finding) -> tuple[str, str]:
    frm, to = f.ev("from_state") or "?", f.ev("to_state") or "?"
    where = f.path or "__remote_log_metadata"
    what = (
        f"an update of {_kafka_segment(f)} from {frm} to {to} that Kafka's metadata manager rejects"
        if f.severity != "info"
        else f"an update of {_kafka_segment(f)} the metadata manager no longer knows (to {to})"
    )
    reason = f"Metadata record {where} is {what}, so the broker ignored it" + (
        f": {f.ev('problem')}." if f.ev("problem") else "."
    )
    step = _lines(
        f"Read the record: {_kafka_record(f)}",
        "A late duplicate after DELETE_SEGMENT_FINISHED is harmless; else check the writing broker's log.",
    )
    return reason, step


@EXPLAINERS.register("remote_segment_metadata_growth")
def _remote_growth(f: Finding) -> tuple[str, str]:
    records, live = f.ev("records"), f.ev("live_segments")
    ratio = f.ev("records_per_live_segment")
    reason = (
        f"{f.path or '__remote_log_metadata'} holds {records if records is not None else 'many'} records for "
        f"{live if live is not None else 'few'} live remote segments ({ratio or '?'} per segment): its "
        "retention is infinite by default, so brokers replay a longer history at every restart."
    )
    step = _lines(
        f"See its configuration: {_kafka_configs(f, str(f.path or '__remote_log_metadata'))}",
        "Consider the broker setting remote.log.metadata.topic.retention.ms (default -1, infinite): it must "
        "stay longer than the retention of every tiered topic, or live segments lose their metadata.",
    )
    return reason, step


def _kafka_corrupt_record(f: Finding) -> tuple[str, str]:
    """``corrupt_metadata`` of a Kafka ``__remote_log_metadata`` record (kafka-audit)."""
    problem = str(f.ev("problem") or "does not decode")
    reason = f"Metadata record {f.path or '__remote_log_metadata'} cannot be decoded: {problem}."
    step = _lines(
        f"Read it with Kafka's own decoder: {_kafka_record(f)}",
        "Until it decodes, no remote object is offered for deletion (the record may name it).",
    )
    return reason, step
