"""Inventory rows from decoded metadata: one function per table of ``ledgerlens.inventory.schemas`` (a ledger,
a managed ledger and its ledger list, a cursor, a schema locator, a namespace's policies), pure: bytes
and a znode's times in, rows out. Every source builds its rows here (the live ZooKeeper scan, its
snapshots, the admin API), so a table means the same whichever source filled it.

A node that does not decode becomes one row with ``error`` and ``path`` set. BookKeeper's ledgers,
which number millions, are built column by column into Arrow record batches (:class:`LedgerColumns`):
the compiled decoder (``formats/_ledgerwire.c``) takes the common case, and anything it declines goes
through the one Python decoder (``formats.bookkeeper``) with the same result. The managed ledgers'
ledger lists, tens of millions of rows too, are likewise built column by column from the parsed
protobuf (:class:`ManagedLedgerColumns`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.errors import DecodeError
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_cursor, offload_info, parse_managed_ledger_info
from ledgerlens.formats.names import decode_component, parse_managed_ledger
from ledgerlens.formats.paths import ledger_id_from_path
from ledgerlens.formats.policies import decode_namespace_policies
from ledgerlens.formats.schema import decode_schema_locator
from ledgerlens.inventory import schemas


class ZnodeTimes(Protocol):
    """What a row takes from a znode's stat (kazoo's ``ZnodeStat`` is one)."""

    @property
    def ctime(self) -> int: ...
    @property
    def mtime(self) -> int: ...
    @property
    def version(self) -> int: ...


class Times(NamedTuple):
    """A znode's times, where there is no stat object (the compiled decoder's declined reads)."""

    ctime: int
    mtime: int
    version: int


def _error_text(e: BaseException) -> str:
    if isinstance(e, DecodeError):
        return str(e)
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _stat_times(stat: ZnodeTimes | None) -> dict[str, Any]:
    if stat is None:
        return {}
    return {"znode_ctime_ms": stat.ctime, "znode_mtime_ms": stat.mtime, "znode_version": stat.version}


def _enum_name(v: Any) -> str | None:
    if v is None:
        return None
    name = getattr(v, "name", None)
    return name if isinstance(name, str) else str(v)


# -- /ledgers ----------------------------------------------------------------------------------
# FORMATS.md section 4: Pulsar's custom metadata keys -> bk_ledgers columns.
CUSTOM_METADATA_COLUMNS = {
    "application": "application",
    "component": "component",
    "pulsar/managed-ledger": "managed_ledger",
    "pulsar/cursor": "cursor",
    "pulsar/schemaId": "schema_id",
    "pulsar/compactedTopic": "compacted_topic",
    "pulsar/delayedIndexBucketKey": "bucket_key",
    "pulsar/delayedIndexTopic": "delayed_topic",
    "pulsar/delayedIndexCursor": "delayed_cursor",
}


def ledger_row(
    path: str, root: str, data: bytes | None, stat: ZnodeTimes | None, ledger_id: int | None = None
) -> dict[str, Any]:
    """One BK_LEDGERS row from a ledger znode's bytes and stat (decode errors become ``error``);
    ``ledger_id`` None: parsed from ``path``."""
    row: dict[str, Any] = {"path": path, **_stat_times(stat)}
    try:
        row["ledger_id"] = ledger_id_from_path(path, root) if ledger_id is None else ledger_id
        md = decode_ledger_metadata(data or b"", path=path)
    except Exception as e:  # noqa: BLE001 - DecodeError, or a decoder bug: keep the row, name the path
        row["error"] = _error_text(e)
        return row
    custom = md.custom_text()
    row.update(
        format_version=md.format_version,
        state=_enum_name(md.state),
        ensemble_size=md.ensemble_size,
        write_quorum=md.write_quorum,
        ack_quorum=md.ack_quorum,
        length=md.length,
        last_entry_id=md.last_entry_id,
        ctime_ms=md.ctime_ms if md.ctime_ms is not None else (stat.ctime if stat else None),
        digest_type=_enum_name(md.digest_type),
        bookies=list(md.bookies),
        custom_metadata=custom,
    )
    for key, column in CUSTOM_METADATA_COLUMNS.items():
        if key in custom:
            row[column] = custom[key]
    return row


_LEDGER_STATES = {1: "OPEN", 2: "IN_RECOVERY", 3: "CLOSED"}
_LEDGER_DIGESTS = {1: "CRC32", 2: "HMAC", 3: "CRC32C", 4: "DUMMY"}
_LEDGER_NESTED = ("bookies", "custom_metadata")  # built from flat value lists


class LedgerColumns:
    """BK_LEDGERS rows built column by column, for scans of millions of ledgers.

    The v3 metadata every BookKeeper since 4.9 writes goes straight from the protobuf into column
    lists (no metadata object, no row dict, bookies and custom metadata as flat value lists);
    anything else (v1, v2 text, a decode error, custom metadata that is not UTF-8) goes through
    :func:`ledger_row`, so both paths give the same row. :meth:`take` hands out the rows so far as
    one Arrow record batch of the inventory schema.

    The common case (clean v3 metadata) is decoded by compiled code when it is built
    (``ledgerlens.formats._ledgerwire``, a C extension ``make setup`` compiles): the same rows,
    0.7 instead of 5.8 µs per ledger. It declines anything unusual, which then takes the Python path.
    ``compiled=False`` keeps to Python.
    """

    BATCH_ROWS = 8192  # rows per record batch its callers take
    _SCALARS = tuple(f.name for f in schemas.BK_LEDGERS.fields if f.name not in _LEDGER_NESTED)
    # the compiled appender's column order: these scalars, then one column per custom metadata key
    _COMPILED_SCALARS = (
        "ledger_id", "path", "format_version", "state", "ensemble_size", "write_quorum", "ack_quorum",
        "length", "last_entry_id", "ctime_ms", "znode_ctime_ms", "znode_mtime_ms", "znode_version",
        "digest_type", "error",
    )  # fmt: skip

    def __init__(self, *, compiled: bool = True) -> None:
        self._appender = _compiled_appender() if compiled else None
        self.errors = 0
        self._reset()

    @property
    def compiled(self) -> bool:
        """True when the compiled decoder takes the common case."""
        return self._appender is not None

    def _reset(self) -> None:
        self._cols: dict[str, list[Any]] = {c: [] for c in self._SCALARS}
        self._bookies: list[str] = []
        self._bookie_ends: list[int] = [0]
        self._bookies_null: list[bool] = []
        self._keys: list[str] = []
        self._values: list[str] = []
        self._custom_ends: list[int] = [0]
        self._custom_null: list[bool] = []
        self._fast = None
        if self._appender is not None:
            self._fast = self._appender(
                tuple(self._cols[c] for c in self._COMPILED_SCALARS),
                tuple(k.encode() for k in CUSTOM_METADATA_COLUMNS),
                tuple(self._cols[c] for c in CUSTOM_METADATA_COLUMNS.values()),
                (self._bookies, self._bookie_ends, self._bookies_null, self._keys, self._values)
                + (self._custom_ends, self._custom_null),
                tuple(_LEDGER_STATES[i] for i in (1, 2, 3)),
                tuple(_LEDGER_DIGESTS[i] for i in (1, 2, 3, 4)),
            )

    def __len__(self) -> int:
        return len(self._cols["path"])

    def add_row(self, row: dict[str, Any]) -> None:
        """Append a row given as a dict (absent columns are null)."""
        for c, values in self._cols.items():
            values.append(row.get(c))
        bookies = row.get("bookies")
        self._bookies_null.append(bookies is None)
        self._bookies.extend(bookies or ())
        self._bookie_ends.append(len(self._bookies))
        custom = row.get("custom_metadata")
        self._custom_null.append(custom is None)
        if custom:
            self._keys.extend(custom)
            self._values.extend(custom.values())
        self._custom_ends.append(len(self._keys))
        if row.get("error"):
            self.errors += 1

    def add(
        self,
        path: str,
        root: str,
        ledger_id: int | None,
        data: bytes | None,
        ctime: int,
        mtime: int,
        version: int,
    ) -> None:
        """Append the row of one ledger znode (``ledger_id`` None: parsed from ``path``)."""
        if self._fast is not None and self._fast.add(path, root, ledger_id, data, ctime, mtime, version):
            return
        # not the common case, or no compiled decoder: the one Python decoder names any problem
        self.add_row(ledger_row(path, root, data, Times(ctime, mtime, version), ledger_id))

    def add_reads(
        self, buf: bytes, offset: int, paths: Sequence[str], index: int, root: str
    ) -> tuple[int, int, bool]:
        """Append, with the compiled decoder, the results of a multiRead reply ``buf`` from ``offset``
        (the reads of ``paths`` from ``index``) until one it does not take: (next index, its offset,
        whether it stopped there). Needs the compiled decoder (:attr:`compiled`)."""
        if self._fast is None:
            raise ValueError("LedgerColumns.add_reads: the compiled decoder is not in use")
        index, offset, stopped = self._fast.add_reads(buf, offset, paths, index, root)
        return index, offset, bool(stopped)

    def take(self) -> pa.RecordBatch:
        """The rows added since the last call, as one record batch; the builder starts empty again."""
        arrow = _arrow("bk_ledgers")
        text = pa.string()
        bookies = pa.ListArray.from_arrays(
            pa.array(self._bookie_ends, type=pa.int32()),
            pa.array(self._bookies, type=text),
            mask=pa.array(self._bookies_null, type=pa.bool_()),
        )
        custom = pa.MapArray.from_arrays(
            pa.array(self._custom_ends, type=pa.int32()),
            pa.array(self._keys, type=text),
            pa.array(self._values, type=text),
            mask=pa.array(self._custom_null, type=pa.bool_()),
        )
        nested = {"bookies": bookies, "custom_metadata": custom}
        arrays = [
            nested[f.name] if f.name in nested else pa.array(self._cols[f.name], type=f.type) for f in arrow
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=arrow)


@functools.cache
def _compiled_appender() -> Any:
    """The compiled decoder's ``Appender`` type; None where it is not built (Python alone)."""
    try:
        from ledgerlens.formats._ledgerwire import Appender  # the optional compiled decoder, may be absent
    except ImportError:
        return None
    return Appender


# Columns copied as they are from a decoded record's attribute of the same name (after a prefix).
_OFFLOAD_ATTRS = ("uuid", "complete", "bookkeeper_deleted", "timestamp_ms", "driver", "bucket")
_OFFLOAD_SEGMENT_ATTRS = ("uuid", "complete", "end_entry_id", "assigned_ms", "offloaded_ms")
_CURSOR_ATTRS = (
    "cursors_ledger_id",
    "mark_delete_ledger_id",
    "mark_delete_entry_id",
    "last_active_ms",
    "individual_deleted_ranges",
)
_SCHEMA_ENTRY_ATTRS = ("version", "ledger_id", "entry_id")
_POLICY_ATTRS = (
    "retention_minutes",
    "retention_mb",
    "offload_deletion_lag_ms",
    "offload_threshold_bytes",
    "offload_driver",
    "offload_bucket",
    "deleted",
)


def _attrs(record: object, names: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """``{prefix + name: record.name}`` for each of ``names``."""
    return {prefix + n: getattr(record, n) for n in names}


@functools.cache
def _arrow(table: str) -> pa.Schema:
    """The Arrow schema of an inventory table (built on first use)."""
    return to_arrow_schema(schemas.INVENTORY[table])


# -- /managed-ledgers --------------------------------------------------------------------------
MANAGED_LEDGERS_T, ML_LEDGERS_T, CURSORS_T = "managed_ledgers", "ml_ledgers", "cursors"


def _name_columns(ml_name: str) -> dict[str, Any]:
    try:
        n = parse_managed_ledger(ml_name)
    except Exception:  # noqa: BLE001 - an odd name still gets a row; tenant/namespace from the path
        parts = ml_name.split("/")
        ns = "/".join(parts[: parts.index("persistent")]) if "persistent" in parts else None
        return {"tenant": parts[0] if parts else None, "namespace": ns, "topic": None}
    return {"tenant": n.tenant, "namespace": n.namespace, "topic": n.topic}


class ManagedLedgerColumns:
    """MANAGED_LEDGERS and ML_LEDGERS rows of many managed-ledger znodes, built column by column.

    A managed ledger lists its ledgers (ten, a thousand), and a large cluster has millions: each
    ``LedgerInfo`` goes from the parsed protobuf straight into column lists, with no record object
    and no row dict, the offload columns filled only for the ledgers that have an offload context
    (:func:`formats.managed_ledger.offload_info`, the record decoder's own). The values are those of
    :func:`formats.managed_ledger.decode_managed_ledger` (``tests/unit/test_formats_managed_ledger.py``
    holds them equal). :meth:`take` hands out the rows so far as one record batch per table.
    """

    BATCH_ROWS = 8192  # ML_LEDGERS rows (plus MANAGED_LEDGERS rows) per take its callers make
    _ML_SCALARS = tuple(f.name for f in schemas.MANAGED_LEDGERS.fields)
    # the ML_LEDGERS columns appended ledger by ledger (taken back when a node fails midway), then the rest
    _PER_LEDGER = ("ledger_id", "entries", "size", "timestamp_ms", "properties")
    _LI_SCALARS = (*_PER_LEDGER, "managed_ledger", "tenant", "namespace", "position", "is_last")
    _OFFLOAD = tuple(f"offload_{a}" for a in _OFFLOAD_ATTRS)

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # maps as lists of (key, value) pairs, or None (a null map)
        self._ml: dict[str, list[Any]] = {c: [] for c in self._ML_SCALARS}
        self._li: dict[str, list[Any]] = {c: [] for c in self._LI_SCALARS}
        self._offloads: list[tuple[int, Any]] = []  # (ML_LEDGERS row, OffloadInfo)

    def __len__(self) -> int:
        return len(self._ml["path"]) + len(self._li["ledger_id"])

    def add_row(self, row: dict[str, Any]) -> None:
        """Append a MANAGED_LEDGERS row given as a dict (absent columns are null)."""
        for c, values in self._ml.items():
            values.append(row.get(c))
        props = row.get("properties")
        self._ml["properties"][-1] = None if props is None else list(props.items())

    def add(self, ml_name: str, path: str, data: bytes | None, stat: ZnodeTimes | None) -> bool:
        """Append the rows of one managed-ledger znode; False when it does not decode (its
        MANAGED_LEDGERS row then names the problem in ``error``)."""
        names = _name_columns(ml_name)
        row: dict[str, Any] = {"managed_ledger": ml_name, "path": path, **names, **_stat_times(stat)}
        first = len(self._li["ledger_id"])
        try:
            compression, info = parse_managed_ledger_info(data or b"", path=path)
            ledgers: Any = info.ledgerInfo if info is not None else ()
            total_size, total_entries = self._ledgers(ledgers, first)
        except Exception as e:  # noqa: BLE001 - DecodeError, or a decoder bug: keep the row, name the path
            self._truncate(first)
            row["error"] = _error_text(e)
            self.add_row(row)
            return False
        n = len(ledgers)
        li = self._li
        li["managed_ledger"].extend([ml_name] * n)
        li["tenant"].extend([names["tenant"]] * n)
        li["namespace"].extend([names["namespace"]] * n)
        li["position"].extend(range(n))
        li["is_last"].extend([False] * (n - 1) + [True] if n else ())
        row.update(
            compression=compression,
            ledger_count=n,
            total_size=total_size,
            total_entries=total_entries,
            last_ledger_id=ledgers[-1].ledgerId if n else None,
            terminated=info is not None and info.HasField("terminatedPosition"),
            properties={kv.key: kv.value for kv in info.properties} if info is not None else {},
        )
        self.add_row(row)
        return True

    def _ledgers(self, ledgers: Any, first: int) -> tuple[int, int]:
        """Append the per-ledger values of the ``LedgerInfo`` messages (the first one is ML_LEDGERS
        row ``first``): their total size and entries."""
        li = self._li
        ids, entries, sizes, times = li["ledger_id"], li["entries"], li["size"], li["timestamp_ms"]
        props = li["properties"]
        none: tuple[()] = ()
        total_size = total_entries = 0
        for i, x in enumerate(ledgers):
            ids.append(x.ledgerId)
            e = x.entries if x.HasField("entries") else None
            z = x.size if x.HasField("size") else None
            entries.append(e)
            sizes.append(z)
            times.append(x.timestamp if x.HasField("timestamp") else None)
            total_entries += e or 0
            total_size += z or 0
            kvs = x.properties
            props.append(list({kv.key: kv.value for kv in kvs}.items()) if kvs else none)
            if x.HasField("offloadContext"):
                self._offloads.append((first + i, offload_info(x.offloadContext)))
        return total_size, total_entries

    def _truncate(self, first: int) -> None:
        """Drop the ML_LEDGERS values appended from row ``first`` on (a node that failed midway)."""
        for c in self._PER_LEDGER:
            del self._li[c][first:]
        while self._offloads and self._offloads[-1][0] >= first:
            self._offloads.pop()

    def take(self) -> Iterator[tuple[str, pa.RecordBatch]]:
        """The rows added since the last call, as (table, record batch) pairs (none for a table with
        no row); the builder starts empty again."""
        if self._ml["path"]:
            arrow = _arrow(MANAGED_LEDGERS_T)
            arrays = [pa.array(self._ml[f.name], type=f.type) for f in arrow]
            yield MANAGED_LEDGERS_T, pa.RecordBatch.from_arrays(arrays, schema=arrow)
        n = len(self._li["ledger_id"])
        if n:
            arrow = _arrow(ML_LEDGERS_T)
            cols: dict[str, list[Any]] = {c: [None] * n for c in (*self._OFFLOAD, "offload_segments")}
            for at, off in self._offloads:
                for a in _OFFLOAD_ATTRS:
                    cols[f"offload_{a}"][at] = getattr(off, a)
                cols["offload_segments"][at] = [_attrs(s, _OFFLOAD_SEGMENT_ATTRS) for s in off.segments]
            cols.update(self._li)
            arrays = [pa.array(cols[f.name], type=f.type) for f in arrow]
            yield ML_LEDGERS_T, pa.RecordBatch.from_arrays(arrays, schema=arrow)
        self._reset()


def cursor_row(
    ml_name: str, node: str, path: str, data: bytes | None, stat: ZnodeTimes | None
) -> dict[str, Any]:
    """One CURSORS row from a cursor znode (``node`` is its URL-encoded name)."""
    names = _name_columns(ml_name)
    row: dict[str, Any] = {
        "managed_ledger": ml_name,
        "tenant": names["tenant"],
        "namespace": names["namespace"],
        "cursor_node": node,
        "path": path,
        **_stat_times(stat),
    }
    try:
        row["cursor"] = decode_component(node)
    except Exception:  # noqa: BLE001 - keep the raw name
        row["cursor"] = node
    try:
        c = decode_cursor(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        row["error"] = _error_text(e)
        return row
    row.update(
        _attrs(c, _CURSOR_ATTRS),
        compression=_enum_name(c.compression),
        properties=dict(c.properties),
        cursor_properties=dict(c.cursor_properties),
    )
    return row


# -- /schemas ----------------------------------------------------------------------------------
def schema_rows(
    schema_id: str, path: str, data: bytes | None, stat: ZnodeTimes | None
) -> list[dict[str, Any]]:
    """SCHEMA_LEDGERS rows of one locator: one per index entry, plus ``info`` if not in the index."""
    parts = schema_id.split("/")
    base: dict[str, Any] = {
        "schema_id": schema_id,
        "path": path,
        "tenant": parts[0],
        "namespace": "/".join(parts[:2]) if len(parts) >= 2 else None,
        "znode_mtime_ms": stat.mtime if stat else None,
    }
    try:
        loc = decode_schema_locator(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        return [dict(base, error=_error_text(e))]
    latest = loc.latest
    rows = []
    seen = set()
    for entry in loc.index:
        seen.add((entry.version, entry.ledger_id, entry.entry_id))
        is_latest = latest is not None and entry.version == latest.version
        rows.append(dict(base, **_attrs(entry, _SCHEMA_ENTRY_ATTRS), is_latest=is_latest))
    if latest is not None and (latest.version, latest.ledger_id, latest.entry_id) not in seen:
        rows.append(dict(base, **_attrs(latest, _SCHEMA_ENTRY_ATTRS), is_latest=True))
    return rows


# -- /admin/policies ---------------------------------------------------------------------------
def policy_row(namespace: str, path: str, data: bytes | None) -> dict[str, Any]:
    """One NAMESPACE_POLICIES row from a policies znode."""
    row: dict[str, Any] = {"tenant": namespace.split("/")[0], "namespace": namespace, "path": path}
    try:
        p = decode_namespace_policies(data or b"", path=path)
    except Exception as e:  # noqa: BLE001
        row["error"] = _error_text(e)
        return row
    row.update(_attrs(p, _POLICY_ATTRS))
    return row
