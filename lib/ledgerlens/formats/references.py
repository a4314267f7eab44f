"""What Pulsar metadata references: the one definition of "referenced".

A BookKeeper ledger is referenced when any of these names it:

- a managed ledger's ledger list (``component`` ``managed-ledger``);
- a cursor's cursor ledger (``cursor``);
- a cursor's ``CompactedTopicLedger`` property (``compacted-ledger``; the ``__compaction``
  cursor holds the compacted ledger of its topic);
- a cursor property ``#pulsar.internal.delayed.bucket_<start>_<end>`` (``delayed-index-bucket``,
  PIP-195 bucket snapshots);
- a schema locator's index or latest entry (``schema``).

An offloaded copy (its objects in the bucket) is referenced when a managed ledger's offload
context names its uuid, per-ledger or as a PIP-76 segment.

A node whose references are not known cannot prove anything unreferenced: one that does not decode
or cannot be read, and a managed-ledger node emptied by an edit (0 bytes, rewritten after it was
created: Pulsar never writes that, and BookKeeper's own garbage collector once deleted live
ledgers on such a node).

The audit evaluates these same fields over the inventory columns in Spark
(``ledgerlens.audit.references``; ``tests/spark/test_references_equivalence.py`` holds both to the
same answer); the audit's re-verification and the deleter evaluate them here, on decoded records.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ledgerlens.errors import LedgerLensError
from ledgerlens.formats.managed_ledger import (
    COMPACTED_LEDGER_PROPERTY,
    DELAYED_BUCKET_PREFIX,
    CursorRecord,
    ManagedLedgerRecord,
)
from ledgerlens.formats.names import managed_ledger_to_topic, schema_id_for_topic, topic_to_managed_ledger
from ledgerlens.formats.schema import SchemaLocatorRecord

__all__ = [
    "COMPACTED_LEDGER_PROPERTY",
    "COMPACTION_CURSOR",
    "DELAYED_BUCKET_PREFIX",
    "Reference",
    "cursor_references",
    "is_emptied",
    "managed_ledger_references",
    "offload_uuids",
    "owners_of",
    "schema_references",
]

COMPACTION_CURSOR = "__compaction"  # the cursor of topic compaction; it names the compacted ledger


@dataclass(frozen=True)
class Reference:
    """One reference to a ledger: which ledger, by what role, under which property key."""

    ledger_id: int
    component: str  # managed-ledger, cursor, compacted-ledger, delayed-index-bucket, schema
    key: str | None = None


def managed_ledger_references(rec: ManagedLedgerRecord) -> Iterator[Reference]:
    """The ledgers of a managed ledger's ledger list."""
    for li in rec.ledgers:
        yield Reference(li.ledger_id, "managed-ledger")


def offload_uuids(rec: ManagedLedgerRecord) -> set[str]:
    """Every offload uuid a managed ledger's offload contexts name (per-ledger and PIP-76 segments),
    complete or not: an incomplete offload's objects are the broker's to clean up."""
    out: set[str] = set()
    for li in rec.ledgers:
        if li.offload is None:
            continue
        if li.offload.uuid:
            out.add(li.offload.uuid)
        out.update(s.uuid for s in li.offload.segments if s.uuid)
    return out


def cursor_references(cur: CursorRecord) -> Iterator[Reference]:
    """The ledgers a cursor holds: its cursor ledger, its compacted ledger, its bucket snapshots."""
    if cur.cursors_ledger_id >= 0:
        yield Reference(cur.cursors_ledger_id, "cursor")
    compacted = cur.compacted_ledger_id
    if compacted is not None and compacted >= 0:
        yield Reference(compacted, "compacted-ledger", COMPACTED_LEDGER_PROPERTY)
    for key, ledger_id in sorted(cur.delayed_bucket_ledgers.items()):
        yield Reference(ledger_id, "delayed-index-bucket", key)


def schema_references(loc: SchemaLocatorRecord) -> Iterator[Reference]:
    """The ledgers of a schema locator (every version)."""
    for ledger_id in sorted(loc.ledger_ids):
        yield Reference(ledger_id, "schema")


def is_emptied(rec: ManagedLedgerRecord, znode_version: int | None) -> bool:
    """A managed-ledger node rewritten to 0 bytes: its references are unknown, not none.

    A node created empty (version 0) is a new topic's; one written empty later is an edit."""
    return rec.compression == "EMPTY" and znode_version is not None and znode_version > 0


def owners_of(custom: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """(managed ledgers, schema ids) a ledger's BookKeeper custom metadata ties it to: the nodes that
    would reference it (its managed ledger, compacted or delayed-index topic, and their schemas)."""
    mls: set[str] = set()
    schema_ids: set[str] = set()
    if custom.get("pulsar/managed-ledger"):
        mls.add(custom["pulsar/managed-ledger"])
    for key in ("pulsar/compactedTopic", "pulsar/delayedIndexTopic"):
        if custom.get(key):
            try:
                mls.add(topic_to_managed_ledger(custom[key]))
            except LedgerLensError:
                pass
    if custom.get("pulsar/schemaId"):
        schema_ids.add(custom["pulsar/schemaId"])
    for ml in list(mls):
        try:
            schema_ids.add(schema_id_for_topic(managed_ledger_to_topic(ml)))
        except LedgerLensError:
            pass
    return mls, schema_ids
