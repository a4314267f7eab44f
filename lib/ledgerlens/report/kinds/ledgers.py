"""BookKeeper ledgers against the metadata: ``orphan_ledger``, ``unattributed_ledger``, ``foreign_ledger``,
``missing_ledger`` (rules: ``ledgerlens.audit.rules.ledgers``)."""

from __future__ import annotations

from ledgerlens.report.kinds.finding import NOT_OURS, Finding, info_internal, ledger_meta, lines, q
from ledgerlens.report.kinds.registry import Subject

_LEDGERS = Subject("ledgers", rule="audit/rules/ledgers.py")

_OWNER_WORDS = {
    "managed-ledger": "data ledger",
    "cursor": "cursor ledger",
    "schema": "schema ledger",
    "compacted-ledger": "compacted ledger",
    "delayed-index-bucket": "delayed-delivery bucket ledger",
}


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
    age = f.aged(", created {} ago")
    reason = f"BookKeeper {what} {f.ledger_id} ({f.size}{age}) was written for {owner}{sub}, but {gone}."
    if f.ev("owner_emptied"):
        node = f.ev("owner_node") or owner
        reason += (
            f" Its owner's node {node} was emptied (0 bytes, rewritten): suspicious metadata, "
            "not proof of an orphan."
        )
        return reason, lines(
            f"Restore {node} (backup, or the broker's view: {info_internal(f)})" if f.topic else "",
            f"Restore {node} from a backup" if not f.topic else "",
            "Do not delete this ledger until the node is explained (see emptied_managed_ledger).",
        )
    step = lines(
        "Confirm nothing references it any more:",
        f"  {ledger_meta(f)}",
        f"  {info_internal(f)}" if f.topic else "",
        "Reclaim it through an approved deletion plan (ledgerlens never deletes from a report);",
        f"by hand: bookkeeper shell deleteledger -ledgerid {f.ledger_id}",
    )
    return reason, step


ORPHAN_LEDGER = _LEDGERS.declare("orphan_ledger", "warning", _orphan_ledger)


def _unattributed_ledger(f: Finding) -> tuple[str, str]:
    app = f.ev("application")
    who = f"application {app!r}" if app else "no Pulsar custom metadata"
    age = f.aged(", created {} ago")
    reason = (
        f"Ledger {f.ledger_id} ({f.size}{age}) has {who} and nothing in Pulsar references it: "
        "it may belong to another BookKeeper client or an old Pulsar version."
    )
    step = lines(
        f"Find its owner from its metadata (ensemble, ctime, custom metadata): {ledger_meta(f)}",
        NOT_OURS,
    )
    return reason, step


UNATTRIBUTED_LEDGER = _LEDGERS.declare("unattributed_ledger", "info", _unattributed_ledger)


def _foreign_ledger(f: Finding) -> tuple[str, str]:
    tenant = f.tenant or "an unknown tenant"
    why = f.ev("reason")
    reason = (
        f"Ledger {f.ledger_id} ({f.size}) belongs to {tenant}, a tenant this cluster does not own: "
        f"another Pulsar cluster sharing these bookies may still use it" + (f" ({why})." if why else ".")
    )
    step = lines(
        f"See its metadata: {ledger_meta(f)}",
        "Audit the cluster that owns the tenant (--pulsar-metadata lists every store sharing BookKeeper);",
        "if the tenant was deleted, audit again with --deleted-tenant TENANT. Never delete it from here.",
    )
    return reason, step


FOREIGN_LEDGER = _LEDGERS.declare("foreign_ledger", "info", _foreign_ledger)


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
        f"Confirm it is gone: {ledger_meta(f)}   (expect: ledger does not exist)",
        f"See what the topic holds: {info_internal(f)}" if f.topic else "",
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
    return reason, lines(*steps)


MISSING_LEDGER = _LEDGERS.declare(
    "missing_ledger",
    "critical",
    _missing_ledger,
    also=("warning",),
    varies="a warning when the plausibility gate suspects a wrong metadata root (audit/gates.py)",
)
