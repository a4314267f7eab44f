"""A deletion plan's items: what each planned finding becomes, with the state it must still be in.

``ledgerlens.deletion.plan`` picks the findings; these build one item per ledger
(``delete_ledger``), offload copy (``delete_object``), Kafka remote segment
(``delete_remote_segment``) or topic to load (``load_topic``), and record every finding left out
with its reason (``Refusals``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledgerlens.errors import LedgerLensError
from ledgerlens.formats.names import managed_ledger_to_topic
from ledgerlens.formats.offload import parse_offload_key


def finding_evidence(row: Mapping[str, Any]) -> dict[str, Any]:
    """A finding's ``evidence`` JSON as a dict (what does not parse, under ``unparsed``)."""
    try:
        ev = json.loads(row.get("evidence") or "{}")
    except ValueError:
        return {"unparsed": row.get("evidence")}
    return ev if isinstance(ev, dict) else {"value": ev}


@dataclass
class Refusals:
    """The findings a plan leaves out, each with its reason (``investigate``: a person must look)."""

    rows: list[dict[str, Any]]

    def add(self, row: Mapping[str, Any], reason: str, *, investigate: bool = False) -> None:
        self.rows.append(
            {
                "kind": row.get("kind"),
                "ledger_id": row.get("ledger_id"),
                "managed_ledger": row.get("managed_ledger"),
                "object_key": row.get("object_key"),
                "reason": reason,
                **({"action": "investigate"} if investigate else {}),
            }
        )


IDENTITY = ("kind", "severity", "component", "ledger_id", "managed_ledger", "cursor", "path", "object_key")


def identity(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that name a finding (``IDENTITY``), as a plan item records them."""
    return {k: row.get(k) for k in IDENTITY}


def ledger_item(
    row: Mapping[str, Any], bk: Mapping[str, Any] | None, refuse: Refusals
) -> dict[str, Any] | None:
    """The ``delete_ledger`` item of an orphan ledger finding with its ``bk_ledgers`` row, or None
    (refused: the state the deleter must find again is not known)."""
    lid = row.get("ledger_id")
    if lid is None:
        refuse.add(row, "no ledger id")
        return None
    if bk is None:
        refuse.add(row, "ledger absent from the audit's bk_ledgers inventory")
        return None
    if bk.get("error"):
        refuse.add(row, f"ledger metadata did not decode at the audit: {bk['error']}")
        return None
    custom = dict(bk.get("custom_metadata") or {})
    if custom.get("application") != "pulsar":
        refuse.add(row, "ledger has no Pulsar custom metadata")
        return None
    if bk.get("znode_version") is None:
        refuse.add(row, "the inventory has no znode version for the ledger")
        return None
    return {
        "item_id": f"ledger:{int(lid)}",
        "action": "delete_ledger",
        "finding": identity(row),
        "tenant": row.get("tenant"),
        "namespace": row.get("namespace"),
        "age_seconds": row.get("age_seconds"),
        "bytes": row.get("bytes"),
        "evidence": finding_evidence(row),
        "expected": {
            "ledger_id": int(lid),
            "path": bk.get("path"),
            "znode_version": int(bk["znode_version"]),
            "custom_metadata": dict(sorted(custom.items())),
            "ctime_ms": bk.get("ctime_ms"),
            "length": bk.get("length"),
            "state": bk.get("state"),
        },
    }


def offload_items(
    rows: Sequence[Mapping[str, Any]],
    objects: Mapping[str, Mapping[str, Any]],
    bucket: str | None,
    refuse: Refusals,
) -> list[dict[str, Any]]:
    """One item per offload copy ((uuid, ledger) or a streaming uuid), data and index objects together."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = row.get("object_key")
        parsed = parse_offload_key(str(key)) if key else None
        if parsed is None:
            refuse.add(row, "object key is not an offload data or index key")
            continue
        obj = objects.get(str(key))
        if obj is None:
            refuse.add(row, "object absent from the audit's offload_objects inventory")
            continue
        if not obj.get("etag") or obj.get("size") is None:
            refuse.add(row, "no ETag/size in the inventory (audit made by an older ledgerlens): re-run it")
            continue
        if parsed.ledger_id is not None and row.get("ledger_id") not in (None, parsed.ledger_id):
            refuse.add(row, "finding ledger id differs from the object key's")
            continue
        gid = f"offload:{parsed.uuid}" + (f":{parsed.ledger_id}" if parsed.ledger_id is not None else "")
        groups.setdefault(gid, []).append(row)
    items = []
    for gid, members in groups.items():
        mls = {m.get("managed_ledger") for m in members}
        if len(mls) != 1:
            for m in members:
                refuse.add(
                    m, f"objects of one offload copy name different managed ledgers: {sorted(map(str, mls))}"
                )
            continue
        first = members[0]
        keys = sorted(str(m["object_key"]) for m in members)
        parsed = parse_offload_key(keys[0])
        assert parsed is not None
        obj_states = []
        for k in keys:
            o = objects[k]
            obj_states.append(
                {"key": k, "size": int(o["size"]), "etag": str(o["etag"]), "role": o.get("role")}
            )
        items.append(
            {
                "item_id": gid,
                "action": "delete_object",
                "finding": identity(first),
                "findings": [identity(m) for m in sorted(members, key=lambda m: str(m["object_key"]))],
                "tenant": first.get("tenant"),
                "namespace": first.get("namespace"),
                "age_seconds": min((m.get("age_seconds") or 0) for m in members),
                "bytes": sum(int(m.get("bytes") or 0) for m in members),
                "evidence": finding_evidence(first),
                "expected": {
                    "bucket": bucket or objects[keys[0]].get("bucket"),
                    "uuid": parsed.uuid,
                    "ledger_id": parsed.ledger_id,
                    "managed_ledger": first.get("managed_ledger"),
                    "objects": obj_states,
                },
            }
        )
    return items


def remote_segment_items(rows: Sequence[Mapping[str, Any]], refuse: Refusals) -> list[dict[str, Any]]:
    """One ``delete_remote_segment`` item per Kafka remote segment: its objects with size and ETag."""
    groups: dict[str, list[tuple[Mapping[str, Any], dict[str, Any]]]] = {}
    for row in rows:
        ev = finding_evidence(row)
        missing = [
            k
            for k in ("store", "layout", "topic_id", "partition", "segment_id", "etag")
            if ev.get(k) in (None, "")
        ]
        if missing or not row.get("object_key") or row.get("bytes") is None:
            refuse.add(
                row, f"Kafka object finding without {', '.join(missing) or 'key or size'}: re-run the audit"
            )
            continue
        if ev.get("corrupt_metadata_records"):
            refuse.add(row, "the audit read metadata records that do not decode: nothing is provably unknown")
            continue
        gid = f"remote-segment:{ev['topic_id']}:{int(ev['partition'])}:{ev['segment_id']}"
        groups.setdefault(gid, []).append((row, ev))
    items = []
    for gid, members in groups.items():
        stores = {(ev["store"], ev["layout"]) for _, ev in members}
        if len(stores) != 1:
            for row, _ in members:
                refuse.add(row, f"objects of one segment in different stores: {sorted(stores)}")
            continue
        members.sort(key=lambda m: str(m[0]["object_key"]))
        first, ev = members[0]
        items.append(
            {
                "item_id": gid,
                "action": "delete_remote_segment",
                "finding": identity(first),
                "findings": [identity(r) for r, _ in members],
                "tenant": None,
                "namespace": None,
                "topic": ev.get("topic"),
                "age_seconds": min((r.get("age_seconds") or 0) for r, _ in members),
                "bytes": sum(int(r.get("bytes") or 0) for r, _ in members),
                "evidence": ev,
                "expected": {
                    "store": ev["store"],
                    "layout": ev["layout"],
                    "topic": ev.get("topic"),
                    "topic_id": ev["topic_id"],
                    "partition": int(ev["partition"]),
                    "segment_id": ev["segment_id"],
                    "objects": [
                        {
                            "key": str(r["object_key"]),
                            "size": int(r["bytes"]),
                            "etag": str(e["etag"]),
                            "role": e.get("role"),
                        }
                        for r, e in members
                    ],
                },
            }
        )
    return items


def load_items(rows: Sequence[Mapping[str, Any]], refuse: Refusals) -> list[dict[str, Any]]:
    """One ``load_topic`` item per managed ledger; its findings' ledgers are the evidence."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        ml = row.get("managed_ledger")
        if not ml:
            refuse.add(row, "no managed ledger to load")
            continue
        groups.setdefault(str(ml), []).append(row)
    items = []
    for ml, members in groups.items():
        try:
            topic = managed_ledger_to_topic(ml)
        except LedgerLensError as e:
            for m in members:
                refuse.add(m, f"managed ledger name does not parse: {e}")
            continue
        first = members[0]
        items.append(
            {
                "item_id": f"topic:{ml}",
                "action": "load_topic",
                "finding": identity(first),
                "findings": [
                    identity(m) for m in sorted(members, key=lambda m: (m["kind"], m.get("ledger_id") or -1))
                ],
                "tenant": first.get("tenant"),
                "namespace": first.get("namespace"),
                "age_seconds": max((m.get("age_seconds") or 0) for m in members),
                "bytes": sum(int(m.get("bytes") or 0) for m in members),
                "evidence": {
                    "ledgers": sorted(
                        {int(m["ledger_id"]) for m in members if m.get("ledger_id") is not None}
                    )
                },
                "expected": {"managed_ledger": ml, "topic": topic, "path": first.get("path")},
            }
        )
    return items
