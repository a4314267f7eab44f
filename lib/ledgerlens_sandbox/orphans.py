"""Orphans made to order in a running sandbox, and an audit output that names exactly them.

Deletion tests and benchmarks need many approved orphans: thousands of ledgers cannot be leaked
from a real broker in seconds. :func:`fabricate` writes orphan BookKeeper ledger metadata (real
v3 wire format, Pulsar custom metadata naming a managed ledger of a real tenant that does not
reference them) into the sandbox's ZooKeeper with batched transactions, and orphan offload copies
(real data and index objects, jclouds user metadata) into its bucket. :func:`audit_output` then
writes what an audit of them writes (``findings.parquet``, ``summary.json`` and the
``bk_ledgers``, ``offload_objects``, ``namespace_policies`` inventory tables, read back from the
live stores), so that ``ledgerlens plan`` plans them like any audit's findings.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid as uuidlib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.formats.offload import parse_offload_key
from ledgerlens.formats.paths import ledger_path
from ledgerlens_sandbox import wire
from ledgerlens_sandbox.writer import write_znodes

FIRST_ID = 50_000_000  # far above what a sandbox broker allocates


@dataclass
class Orphans:
    """What :func:`fabricate` made."""

    managed_ledger: str
    ledger_ids: list[int] = field(default_factory=list)
    object_keys: list[str] = field(default_factory=list)
    ctime_ms: int = 0


def fabricate(
    zk: Any,
    s3: Any,
    bucket: str,
    *,
    managed_ledger: str,
    ledgers: int,
    copies: int = 0,
    first_id: int = FIRST_ID,
    ctime_ms: int | None = None,
    cluster: str = "standalone",
    seed: int = 0,
) -> Orphans:
    """Write ``ledgers`` orphan ledger znodes and ``copies`` orphan offload copies (data + index)."""
    ctime = int(time.time() * 1000) - 3600_000 if ctime_ms is None else ctime_ms
    custom = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": managed_ledger}
    out = Orphans(managed_ledger, ctime_ms=ctime)
    nodes: dict[str, tuple[bytes, list[Any] | None]] = {}
    for n in range(ledgers):
        lid = first_id + n
        md = wire.ledger_metadata(
            ensemble=["127.0.0.1:3181"],
            write_quorum=1,
            ack_quorum=1,
            length=1024 + n,
            last_entry_id=9,
            ctime_ms=ctime,
            custom=custom,
            ctoken=lid,
        )
        nodes[ledger_path(lid)] = (wire.bk_metadata(md, 3), None)
        out.ledger_ids.append(lid)
    if nodes:
        write_znodes(zk, nodes)
    puts: list[tuple[str, bytes, dict[str, str]]] = []
    for n in range(copies):
        lid = first_id + ledgers + n
        u = str(uuidlib.UUID(bytes=hashlib.sha256(f"{seed}:{lid}".encode()).digest()[:16], version=4))
        md = wire.ledger_metadata(
            ensemble=["127.0.0.1:3181"],
            write_quorum=1,
            ack_quorum=1,
            length=400,
            last_entry_id=3,
            ctime_ms=ctime,
            custom=custom,
        )
        entries = [
            (i, wire.pulsar_entry(bytes([i]) * 64, sequence_id=i, publish_ms=ctime + i)) for i in range(4)
        ]
        blob, idx = wire.offload_data_object(entries, max_block_size=4096)
        data_key, index_key = wire.offload_data_key(u, lid), wire.offload_index_key(u, lid)
        puts.append((data_key, blob, wire.offload_user_metadata("data", managed_ledger, cluster=cluster)))
        puts.append(
            (
                index_key,
                wire.offload_index_v1(md, idx, len(blob)),
                wire.offload_user_metadata("index", managed_ledger, cluster=cluster),
            )
        )
        out.object_keys += [data_key, index_key]
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda p: s3.put_object(Bucket=bucket, Key=p[0], Body=p[1], Metadata=p[2]), puts))
    return out


def audit_output(
    out_dir: str | Path,
    zk: Any,
    s3: Any,
    bucket: str,
    *,
    ledger_ids: Iterable[int] = (),
    object_keys: Iterable[str] = (),
    tenants: Sequence[str],
    as_of_ms: int | None = None,
) -> Path:
    """An audit ``--out`` directory whose findings are exactly these orphans (read back live)."""
    out = Path(out_dir)
    now = int(time.time() * 1000) if as_of_ms is None else as_of_ms
    bk_rows, ledger_findings = _ledger_rows(zk, list(ledger_ids), now)
    obj_rows, object_findings = _object_rows(s3, bucket, list(object_keys))
    (out / "findings.parquet").mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.Table.from_pylist(ledger_findings + object_findings, schema=_FINDINGS),
        out / "findings.parquet" / "part-0.parquet",
    )
    inv = out / "inventory"
    for table, rows, schema in (
        ("bk_ledgers", bk_rows, _BK),
        ("offload_objects", obj_rows, None),
        ("namespace_policies", [{"tenant": t, "namespace": f"{t}/ns"} for t in tenants], None),
    ):
        (inv / table).mkdir(parents=True, exist_ok=True)
        tbl = (
            pa.Table.from_pylist(rows, schema=schema)
            if rows or schema
            else pa.table({"key": pa.array([], pa.string())})
        )
        pq.write_table(tbl, inv / table / "part-0.parquet")
    (out / "summary.json").write_text(
        json.dumps({"as_of_ms": now, "auditor": "sandbox", "fabricated": True}) + "\n"
    )
    return out


def _ledger_rows(zk: Any, ids: list[int], now: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``bk_ledgers`` rows and ``orphan_ledger`` findings of ledgers ``ids``, their metadata read back."""
    paths = [ledger_path(i) for i in ids]
    results = [zk.get_async(p) for p in paths]
    bk_rows, findings = [], []
    for lid, path, res in zip(ids, paths, results, strict=True):
        data, stat = res.get(timeout=60)
        md = decode_ledger_metadata(data, path=path)
        custom = md.custom_text()
        ml = custom.get("pulsar/managed-ledger")
        bk_rows.append(
            {
                "ledger_id": lid,
                "path": path,
                "znode_version": stat.version,
                "custom_metadata": list(custom.items()),
                "ctime_ms": md.ctime_ms,
                "length": md.length,
                "state": md.state,
                "error": None,
            }
        )
        name = parse_managed_ledger(ml) if ml else None
        component = "cursor" if "pulsar/cursor" in custom else custom.get("component")
        findings.append(
            _finding(
                "orphan_ledger",
                "delete_ledger",
                component,
                ml,
                name,
                ledger_id=lid,
                path=path,
                bytes_=md.length,
                age_s=(now - (md.ctime_ms or now)) // 1000,
            )
        )
    return bk_rows, findings


def _object_rows(s3: Any, bucket: str, keys: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``offload_objects`` rows and ``orphan_offload_object`` findings of ``keys`` (HEAD each)."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        heads = list(pool.map(lambda k: s3.head_object(Bucket=bucket, Key=k), keys))
    obj_rows, findings = [], []
    for key, h in zip(keys, heads, strict=True):
        parsed = parse_offload_key(key)
        assert parsed is not None, key
        meta = {k.lower(): v for k, v in (h.get("Metadata") or {}).items()}
        ml = meta.get("managedledgername")
        name = parse_managed_ledger(ml) if ml else None
        obj_rows.append(
            {
                "bucket": bucket,
                "key": key,
                "size": int(h["ContentLength"]),
                "etag": h["ETag"],
                "role": parsed.role,
                "uuid": parsed.uuid,
                "ledger_id": parsed.ledger_id,
                "layout": parsed.layout,
                "last_modified_ms": int(h["LastModified"].timestamp() * 1000),
            }
        )
        findings.append(
            _finding(
                "orphan_offload_object",
                "delete_object",
                "offload",
                ml,
                name,
                ledger_id=parsed.ledger_id,
                object_key=key,
                bytes_=int(h["ContentLength"]),
                age_s=60,
            )
        )
    return obj_rows, findings


def _finding(
    kind: str,
    action: str,
    component: str | None,
    ml: str | None,
    name: Any,
    *,
    bytes_: int,
    age_s: int,
    **cols: Any,
) -> dict[str, Any]:
    row = {
        "kind": kind,
        "severity": "warning",
        "component": component,
        "ledger_id": None,
        "managed_ledger": ml,
        "cursor": None,
        "path": None,
        "object_key": None,
        "bytes": bytes_,
        "evidence": "{}",
        "action": action,
        "tenant": name.tenant if name else None,
        "namespace": name.namespace if name else None,
        "age_seconds": age_s,
    }
    row.update(cols)
    return row


def _schemas() -> tuple[Any, Any]:
    s, i64, i32 = pa.string(), pa.int64(), pa.int32()
    findings = pa.schema(
        [
            ("kind", s),
            ("severity", s),
            ("component", s),
            ("ledger_id", i64),
            ("managed_ledger", s),
            ("cursor", s),
            ("path", s),
            ("object_key", s),
            ("bytes", i64),
            ("evidence", s),
            ("action", s),
            ("tenant", s),
            ("namespace", s),
            ("age_seconds", i64),
        ]
    )
    bk = pa.schema(
        [
            ("ledger_id", i64),
            ("path", s),
            ("znode_version", i32),
            ("custom_metadata", pa.map_(s, s)),
            ("ctime_ms", i64),
            ("length", i64),
            ("state", s),
            ("error", s),
        ]
    )
    return findings, bk


_FINDINGS, _BK = _schemas()
