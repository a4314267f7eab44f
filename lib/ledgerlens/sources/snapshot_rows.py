"""A ZooKeeper snapshot's nodes as inventory rows, the same rows the live scan makes.

``ledgerlens.sources.zk_snapshot`` reads the nodes of one partition (the snapshot's bytes with the
logs' changes applied), each with whether ``world:anyone`` may read it; ``snapshot_rows`` turns them
into the rows of a stage's tables: ``bk_ledgers`` record batches, managed ledgers and cursors,
schemas, namespace policies and tenants. An unreadable node is an error row (``NOAUTH``), as the
live scan sees it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from ledgerlens.formats import zkdata
from ledgerlens.formats.paths import is_ledger_level1, is_special_znode, ledger_id_from_path
from ledgerlens.inventory.rows import (
    CURSORS_T,
    LedgerColumns,
    ManagedLedgerColumns,
    _name_columns,
    cursor_row,
    policy_row,
    schema_rows,
)
from ledgerlens.sources.base import Row

__all__ = ["NOAUTH", "snapshot_rows"]

_LEAF = re.compile(r"L\d+")
_LEDGER_LEAF = re.compile(r"[0-9]{2,3}(?:/[0-9]+)*/L[0-9]+")  # the common case, checked first
NOAUTH = "NoAuthError (the node's ACL grants world:anyone no read: what the live scan sees)"


def _rel(path: str, chroot: str) -> str:
    return path[len(chroot) :] if chroot else path


def snapshot_rows(
    stage: str,
    root: str,
    chroot: str,
    nodes: Iterable[tuple[zkdata.SnapshotNode, bool]],
    stats: Counter[str],
    store: str,
) -> Iterator[Row]:
    """The rows of ``stage`` from the ``nodes`` (each with whether it is readable) under ``root``;
    paths relative to ``chroot``, as the live scan names them; counters into ``stats``."""
    base = root + "/"
    live_root = _rel(root, chroot)
    if stage == "namespace_policies":
        yield from _policy_rows(root, chroot, nodes, stats, store)
        return
    if stage == "bk_ledgers":
        yield from _ledger_batches(base, chroot, live_root, nodes, stats)
        return
    mls = ManagedLedgerColumns()
    for node, ok in nodes:
        stats["nodes"] += 1
        if not node.path.startswith(base):
            continue
        parts = node.path[len(base) :].split("/")
        path = _rel(node.path, chroot)
        if stage == "managed_ledgers":
            ml, cursor = _ml_parts(parts)
            if ml is None:
                continue
            if cursor is None:
                if len(mls) >= mls.BATCH_ROWS:
                    yield from mls.take()
                if not ok:
                    stats["errors"] += 1
                    mls.add_row({"managed_ledger": ml, "path": path, "error": NOAUTH, **_name_columns(ml)})
                elif not mls.add(ml, path, node.data, node.stat):  # type: ignore[arg-type]
                    stats["errors"] += 1
            else:
                if not ok:
                    r = cursor_row(ml, cursor, path, None, None)
                    r["error"] = NOAUTH
                else:
                    r = cursor_row(ml, cursor, path, node.data, node.stat)  # type: ignore[arg-type]
                if r.get("error"):
                    stats["errors"] += 1
                yield CURSORS_T, r
        elif stage == "schema_ledgers":
            if len(parts) != 3:
                continue
            sid = "/".join(parts)
            if not ok:
                rows = [dict(schema_rows(sid, path, b"", None)[0], error=NOAUTH)]
            else:
                rows = schema_rows(sid, path, node.data, node.stat)  # type: ignore[arg-type]
            for r in rows:
                if r.get("error"):
                    stats["errors"] += 1
                yield "schema_ledgers", r
    yield from mls.take()


def _ledger_batches(
    base: str,
    chroot: str,
    live_root: str,
    nodes: Iterable[tuple[zkdata.SnapshotNode, bool]],
    stats: Counter[str],
) -> Iterator[Row]:
    """BK_LEDGERS record batches of the ledger leaves among ``nodes`` (column by column)."""
    cols = LedgerColumns()
    seen = 0
    for node, ok in nodes:
        seen += 1
        full = node.path
        if not full.startswith(base):
            continue
        if _LEDGER_LEAF.fullmatch(full, len(base)) is None:
            parts = full[len(base) :].split("/")
            if (
                len(parts) < 2
                or is_special_znode(parts[0])
                or not is_ledger_level1(parts[0])
                or not _LEAF.fullmatch(parts[-1])
                or not all(x.isdigit() for x in parts[1:-1])
            ):
                continue
        path = _rel(full, chroot)
        if not ok:
            row: dict[str, Any] = {"path": path, "error": NOAUTH}
            try:
                row["ledger_id"] = ledger_id_from_path(path, live_root)
            except Exception:  # noqa: BLE001
                pass
            cols.add_row(row)
        else:
            st = node.stat
            cols.add(path, live_root, None, node.data, st.ctime, st.mtime, st.version)
        if len(cols) >= cols.BATCH_ROWS:
            stats["errors"] += cols.errors
            cols.errors = 0
            yield "bk_ledgers", cols.take()
    stats["nodes"] += seen
    stats["errors"] += cols.errors
    if len(cols):
        yield "bk_ledgers", cols.take()


def _ml_parts(parts: list[str]) -> tuple[str | None, str | None]:
    """(managed-ledger name, cursor node or None) of a path under /managed-ledgers, as the live walk
    finds them: ``t/ns/persistent/x[/cursor]`` (v2) or ``t/c/ns/persistent/x[/cursor]`` (v1)."""
    if len(parts) in (4, 5) and parts[2] == "persistent":
        return "/".join(parts[:4]), parts[4] if len(parts) == 5 else None
    if len(parts) in (5, 6) and parts[2] not in ("persistent", "non-persistent") and parts[3] == "persistent":
        return "/".join(parts[:5]), parts[5] if len(parts) == 6 else None
    return None, None


def _policy_rows(
    root: str, chroot: str, nodes: Iterable[tuple[zkdata.SnapshotNode, bool]], stats: Counter[str], store: str
) -> Iterator[Row]:
    """NAMESPACE_POLICIES and PULSAR_TENANTS rows: level 2 (and v1 level 3) nodes under the root."""
    base = root + "/"
    tree: dict[str, tuple[zkdata.SnapshotNode, bool]] = {}
    for node, ok in nodes:
        stats["nodes"] += 1
        if node.path.startswith(base) and node.path.count("/") - root.count("/") <= 3:
            tree[node.path] = (node, ok)
    children: dict[str, list[str]] = {}
    for p in tree:
        children.setdefault(p.rsplit("/", 1)[0], []).append(p)
    for tenant_path in sorted(p for p in tree if p.count("/") == root.count("/") + 1):
        yield (
            "pulsar_tenants",
            {"tenant": tenant_path.rsplit("/", 1)[1], "path": _rel(tenant_path, chroot), "store": store},
        )
        for p in sorted(children.get(tenant_path, [])):
            node, ok = tree[p]
            kids = sorted(children.get(p, []))
            if ok and kids and not node.data:
                level = kids  # a v1 cluster node: its children are the namespaces
            else:
                level = [p]
            for q in level:
                n, okq = tree[q]
                ns = q[len(base) :]
                if not okq:
                    stats["errors"] += 1
                    yield (
                        "namespace_policies",
                        {
                            "tenant": ns.split("/")[0],
                            "namespace": ns,
                            "path": _rel(q, chroot),
                            "error": NOAUTH,
                        },
                    )
                    continue
                row = policy_row(ns, _rel(q, chroot), n.data)
                if row.get("error"):
                    stats["errors"] += 1
                yield "namespace_policies", row
