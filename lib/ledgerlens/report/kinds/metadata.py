"""Metadata the audit cannot trust: ``corrupt_metadata``, ``unreadable_metadata``,
``emptied_managed_ledger`` (rules: ``ledgerlens.audit.rules.corrupt``, ``ledgerlens.audit.suspicious``;
the Kafka audit's corrupt metadata records are explained by ``kinds.kafka``)."""

from __future__ import annotations

from ledgerlens.report.kinds.finding import Finding, info_internal, ledger_meta, lines, q
from ledgerlens.report.kinds.kafka import kafka_corrupt_record
from ledgerlens.report.kinds.registry import Subject

_METADATA = Subject("metadata", rule="audit/rules/corrupt.py")
_SUSPICIOUS = Subject("metadata", rule="audit/suspicious.py")

_TABLE_WORDS = {
    "bk_ledgers": "BookKeeper ledger metadata",
    "managed_ledgers": "managed-ledger metadata",
    "cursors": "cursor metadata",
    "schema_ledgers": "schema locator",
    "namespace_policies": "namespace policies",
}


def _zk_shell(f: Finding, command: str, node: str) -> str:
    """``pulsar zookeeper-shell -server <audited ZooKeeper> <command> <node>``."""
    return f"pulsar zookeeper-shell -server {q(f.zk)} {command} {q(node)}"


def _corrupt_metadata(f: Finding) -> tuple[str, str]:
    if f.get("component") == "kafka-remote" or f.ev("metadata_topic"):
        return kafka_corrupt_record(f)
    table = str(f.ev("table") or "")
    problem = str(f.ev("problem") or "unknown problem")
    what = _TABLE_WORDS.get(table, "metadata")
    node = f.path or "an unnamed node"
    if problem.startswith(f"{node}: "):  # decoders name the node; the sentence already does
        problem = problem[len(node) + 2 :]
    reason = f"The {what} node {node} cannot be used: {problem}."
    low = problem.lower()
    steps = [f"Read it: {_zk_shell(f, 'get', node)}"]
    if "noauth" in low or "auth" in low or "acl" in low:
        steps = [
            f"The audit's ZooKeeper identity may not read it: {_zk_shell(f, 'getAcl', node)}",
            "Grant that identity read access (or run the audit with credentials that have it).",
        ]
    elif "version" in low and ("support" in low or "unknown" in low):
        steps.append("Written in a format this ledgerlens does not read: check the writer's version.")
    elif table == "bk_ledgers" and f.ledger_id is not None:
        steps.append(f"Compare with BookKeeper's own reading: {ledger_meta(f)}")
    elif f.topic:
        steps.append(f"Compare with the broker's reading: {info_internal(f)}")
    steps.append("Until it decodes, nothing it may reference is ever reported as an orphan.")
    return reason, lines(*steps)


CORRUPT_METADATA = _METADATA.declare("corrupt_metadata", "critical", _corrupt_metadata)


def _unreadable_metadata(f: Finding) -> tuple[str, str]:
    node = f.path or "an unnamed node"
    reason = (
        f"ZooKeeper denied the audit reading {node} (NoAuth): the audit is blind there, so nothing "
        "it may reference can be judged."
    )
    return reason, lines(
        f"See who may read it: {_zk_shell(f, 'getAcl', node)}",
        "Configure ZooKeeper authentication for ledgerlens (digest or SASL credentials and TLS in the "
        "context file or the environment, never command-line parameters) and audit again.",
    )


UNREADABLE_METADATA = _SUSPICIOUS.declare("unreadable_metadata", "critical", _unreadable_metadata)


def _emptied_managed_ledger(f: Finding) -> tuple[str, str]:
    node = f.path or "its node"
    n = f.ev("owned_ledgers")
    version = f.ev("znode_version")
    reason = (
        f"The managed-ledger node {node} lists no ledger although it was rewritten (znode version "
        f"{version}, 0 bytes) while {n} older ledger(s) ({f.size}) still name it as their owner: "
        "probably a bad edit."
    )
    return reason, lines(
        f"Look at it: {_zk_shell(f, 'stat', node)}",
        f"Compare with the broker's view: {info_internal(f)}" if f.topic else "",
        "Restore the node from a backup before anything it owned is deleted; its ledgers' "
        "orphan_ledger findings carry this caveat and the action investigate.",
    )


EMPTIED_MANAGED_LEDGER = _SUSPICIOUS.declare("emptied_managed_ledger", "warning", _emptied_managed_ledger)
