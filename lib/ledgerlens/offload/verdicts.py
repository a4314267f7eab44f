"""Verification that does not repeat itself: the previous run's verdicts, and a per-run request budget.

An offloaded object is immutable: Pulsar writes it once under a key of its own (a uuid per offload)
and never rewrites it. A run keeps what it verified as ``offload_verdicts.parquet`` (one row per
object: its ``offload_segments`` row with the listing's ``etag``, ``deep`` and ``group_objects``,
the number of objects of its offload); the next run reuses the rows of an offload whose objects all
have a verdict of the same key, size and ETag and the same number of objects (a data object's
checks depend on its index), made by a run of the same depth. Only the other offloads are read.
A reused row is the stored row with the ``last_modified_ms`` of this listing: what a fresh
verification of the same bytes produces. Rows with an ``error`` (not read) are never kept.

``max_requests``: the GETs a run may spend; offloads beyond it, oldest first, are not verified this
run: their rows say :data:`NOT_VERIFIED` in ``error`` (never healthy; the audit reports no orphan
for them) and the next run verifies them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.errors import ConfigError
from ledgerlens.inventory import schemas
from ledgerlens.offload.verify import MAX_INDEX_BYTES, VerifyStats, group_key, verify_objects

__all__ = [
    "NOT_VERIFIED",
    "Incremental",
    "REVERIFY_CHOICES",
    "VERDICTS",
    "VERDICTS_ARROW",
    "VERDICTS_NAME",
    "group_cost",
    "load_verdicts",
    "read_verdicts",
    "reusable_rows",
    "verify_incrementally",
    "within_budget",
]

VERDICTS_NAME = "offload_verdicts.parquet"
NOT_VERIFIED = "not verified: the run's S3 request budget (--s3-max-requests) was spent"
REVERIFY_CHOICES = ("changed", "all")
_EXTRA = (
    T.StructField("etag", T.StringType(), True),  # as listed
    T.StructField("deep", T.BooleanType(), True),  # verified by a --deep-offload-check run
    T.StructField("group_objects", T.IntegerType(), True),  # objects of its offload when verified
)
VERDICTS = T.StructType([*schemas.OFFLOAD_SEGMENTS.fields, *_EXTRA])
VERDICTS_ARROW = to_arrow_schema(VERDICTS)
_ROW_COLUMNS = schemas.columns(schemas.OFFLOAD_SEGMENTS)


@dataclass(frozen=True)
class Incremental:
    """How a run verifies the offload objects: the previous run whose verdicts it may reuse
    (``previous``: its directory; None or ``reverify_all``: verify everything), the GETs it may
    spend (``max_requests``, None: no limit) and where it keeps its own verdicts (``verdicts_out``,
    a directory; None: nowhere)."""

    previous: Path | None = None
    reverify_all: bool = False
    max_requests: int | None = None
    verdicts_out: str | None = None

    @property
    def reuse_from(self) -> Path | None:
        """The directory whose verdicts may be reused (None: verify every object)."""
        return None if self.reverify_all else self.previous

    @classmethod
    def of(cls, reverify: str | None, max_requests: int | str | None, **kw: Any) -> Incremental:
        """From settings (``audit.reverify-objects``, ``s3.max-requests``); empty values are defaults."""
        mode = (reverify or "changed").strip() or "changed"
        if mode not in REVERIFY_CHOICES:
            raise ConfigError(
                f"--reverify-objects must be one of {', '.join(REVERIFY_CHOICES)}, not {mode!r}"
            )
        text = "" if max_requests is None else str(max_requests).strip()
        try:
            n = None if text in ("", "0") else int(text)
        except ValueError:
            raise ConfigError(
                f"--s3-max-requests must be a number of requests, not {max_requests!r}"
            ) from None
        if n is not None and n < 0:
            raise ConfigError(f"--s3-max-requests must be 1 or more (0: no limit), not {n}")
        return cls(reverify_all=mode == "all", max_requests=n, **kw)

    @classmethod
    def from_context(cls, context: Mapping[str, Any] | None, **kw: Any) -> Incremental:
        """From the resolved settings recorded in ``context`` (``contexts.Settings.public()``)."""
        settings = (context or {}).get("settings") or {}

        def value(key: str) -> Any:
            cell = settings.get(key)
            return cell.get("value") if isinstance(cell, Mapping) else None

        return cls.of(value("audit.reverify-objects"), value("s3.max-requests"), **kw)


def read_verdicts(where: Path | None, *, deep: bool) -> pa.Table | None:
    """The verdicts (:data:`VERDICTS` columns) the run in ``where`` made at this depth; None when
    it kept none, or they cannot be read (everything is verified again)."""
    path = where / VERDICTS_NAME if where is not None else None
    if path is None or not path.exists():
        return None
    try:
        table = pq.read_table(str(path), schema=VERDICTS_ARROW)
    except (OSError, ValueError, pa.ArrowException):
        return None
    keep = pc.and_(
        pc.is_null(table.column("error")), pc.equal(pc.fill_null(table.column("deep"), False), deep)
    )
    return table.filter(keep)


def load_verdicts(where: Path | None, *, deep: bool) -> dict[str, dict[str, Any]]:
    """:func:`read_verdicts` by object key ({} when there are none)."""
    table = read_verdicts(where, deep=deep)
    return {} if table is None else {r["key"]: r for r in table.to_pylist()}


def reusable_rows(
    group: list[dict[str, Any]], previous: Mapping[str, Mapping[str, Any] | None], *, deep: bool
) -> list[dict[str, Any]] | None:
    """The rows of ``group`` (listed objects of one offload) from their previous verdicts, or None
    when one object is new or changed (key, size or ETag), the offload had other objects, or the
    verdict is of another depth."""
    out = []
    for o in group:
        v = previous.get(o["key"])
        if (
            v is None
            or v.get("error") is not None
            or bool(v.get("deep")) != deep
            or v.get("bucket") != o["bucket"]
            or v.get("size") != o["size"]
            or not o.get("etag")
            or v.get("etag") != o.get("etag")
            or v.get("group_objects") != len(group)
        ):
            return None
        row = {c: v.get(c) for c in _ROW_COLUMNS}
        row["last_modified_ms"] = o.get("last_modified_ms")
        out.append(row)
    return out


def group_cost(group: list[dict[str, Any]], *, deep: bool) -> int:
    """The GETs verifying ``group`` may take: the index (unless too large to read), the data
    object's header, and with ``deep`` the data object whole."""
    n = 0
    for o in group:
        if o["role"] == "index":
            n += int((o.get("size") or 0) <= MAX_INDEX_BYTES)
        else:
            n += 2 if deep else 1
    return n


def _age(group: list[dict[str, Any]]) -> tuple[int, str]:
    lm = [o["last_modified_ms"] for o in group if o.get("last_modified_ms") is not None]
    return (min(lm) if lm else 0, min(o["key"] for o in group))


def within_budget(
    groups: list[list[dict[str, Any]]], max_requests: int | None, *, deep: bool
) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """(verified, not verified): the oldest offloads whose GETs fit ``max_requests`` (None: all)."""
    if max_requests is None:
        return groups, []
    left = max(0, max_requests)
    fit: list[list[dict[str, Any]]] = []
    rest: list[list[dict[str, Any]]] = []
    for g in sorted(groups, key=_age):
        cost = group_cost(g, deep=deep)
        if cost <= left and not rest:  # in age order: a younger offload never jumps the queue
            fit.append(g)
            left -= cost
        else:
            rest.append(g)
    return fit, rest


def _not_verified(o: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(_ROW_COLUMNS)
    row.update({k: o.get(k) for k in ("bucket", "key", "uuid", "ledger_id", "role", "layout", "size")})
    row.update(last_modified_ms=o.get("last_modified_ms"), checks=[], problems=[], bytes_read=0)
    row["error"] = NOT_VERIFIED
    return row


def verify_incrementally(
    client: Any,
    objects: Iterable[dict[str, Any]],
    *,
    previous: Mapping[str, Mapping[str, Any] | None] | None = None,
    deep: bool = False,
    max_requests: int | None = None,
    max_in_flight: int = 16,
    stats: VerifyStats | None = None,
) -> Iterator[dict[str, Any]]:
    """OFFLOAD_SEGMENTS rows of the listed ``objects`` (OFFLOAD_OBJECTS rows, whole offloads), each
    with its ``etag``, ``deep`` and ``group_objects`` (the :data:`VERDICTS` columns).

    The offloads whose verdicts ``previous`` holds (key -> verdict row) are not read; of the others,
    those within ``max_requests`` GETs are verified (``ledgerlens.offload.verify``), oldest first,
    and the rest get :data:`NOT_VERIFIED` rows. ``stats`` counts ``reused`` and ``not_verified``
    objects besides the verification's own counters.
    """
    stats = stats if stats is not None else VerifyStats()
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for o in objects:
        groups.setdefault(group_key(o), []).append(o)
    extra: dict[str, dict[str, Any]] = {}
    todo: list[list[dict[str, Any]]] = []
    for g in groups.values():
        for o in g:
            extra[o["key"]] = {"etag": o.get("etag"), "deep": deep, "group_objects": len(g)}
        rows = reusable_rows(g, previous, deep=deep) if previous else None
        if rows is None:
            todo.append(g)
            continue
        stats.reused += len(rows)
        for r in rows:
            yield {**r, **extra[r["key"]]}
    fit, rest = within_budget(todo, max_requests, deep=deep)
    for g in rest:
        stats.not_verified += len(g)
        for o in g:
            yield {**_not_verified(o), **extra[o["key"]]}
    flat = [o for g in fit for o in g]
    for r in verify_objects(client, flat, deep=deep, max_in_flight=max_in_flight, stats=stats):
        yield {**r, **extra[r["key"]]}
