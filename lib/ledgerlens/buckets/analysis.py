"""What the bucket snapshots of one subscription say: merges, far-future holders, memory.

Pure functions over pandas frames of the ``bucket_snapshots`` inventory (``schemas.BUCKET_SNAPSHOTS``;
``segments`` is a list of dicts per row). The model follows the broker's tracker (PIP-195):

- buckets are ordered by ledger range; the newest ledgers (after the last sealed bucket) belong to
  the *last mutable bucket*, which lives only in broker memory and has no snapshot.
- with ``delayedDeliveryMaxNumBuckets`` set, when the number of immutable buckets exceeds it the
  tracker merges the adjacent pair holding the fewest delayed indexes together.
- a bucket is deleted only when its last index is delivered: a few far-future messages keep the
  whole snapshot ledger (and its bitmaps in memory) alive.
- memory: the tracker keeps, per immutable bucket, the delayed-index bitmaps of its remaining
  segments and the indexes of the one loaded segment; the in-memory tracker keeps every index
  (three longs in a priority queue).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

INDEX_BYTES = 24  # one delayed index in the tracker's priority queue: timestamp, ledger id, entry id


@dataclass(frozen=True)
class BucketView:
    """The buckets of one subscription, ordered by ledger range, with their segments.

    ``buckets`` has one row per readable bucket (``start_ledger_id, end_ledger_id, ledger_id,
    segment_count, index_count, snapshot_bytes, min_schedule_ms, max_schedule_ms``); ``segments``
    one row per segment (``ledger_id, segment, min_schedule_ms, max_schedule_ms, index_count,
    bitmap_bytes, segment_bytes``); ``errors`` the buckets that could not be read.
    """

    managed_ledger: str
    cursor: str
    buckets: pd.DataFrame
    segments: pd.DataFrame
    errors: pd.DataFrame
    mutable_from_ledger_id: int | None  # the last mutable bucket covers ledgers above this one
    notes: list[str] = field(default_factory=list)


_BUCKET_COLS = [
    "start_ledger_id",
    "end_ledger_id",
    "ledger_id",
    "segment_count",
    "index_count",
    "snapshot_bytes",
    "min_schedule_ms",
    "max_schedule_ms",
    "property_key",
]
_SEGMENT_COLS = [
    "ledger_id",
    "start_ledger_id",
    "segment",
    "min_schedule_ms",
    "max_schedule_ms",
    "index_count",
    "bitmap_bytes",
    "segment_bytes",
]


def subscriptions(snapshots: pd.DataFrame) -> list[tuple[str, str]]:
    """``(managed_ledger, cursor)`` pairs that have buckets, sorted."""
    if snapshots.empty:
        return []
    pairs = snapshots[["managed_ledger", "cursor"]].drop_duplicates().itertuples(index=False)
    return sorted((str(m), str(c)) for m, c in pairs)


def subscription_view(snapshots: pd.DataFrame, managed_ledger: str, cursor: str) -> BucketView:
    """The buckets of one subscription (``cursor`` is the decoded subscription name)."""
    mine = snapshots[(snapshots["managed_ledger"] == managed_ledger) & (snapshots["cursor"] == cursor)]
    ok = mine[mine["error"].isna()] if "error" in mine else mine
    errors = mine[mine["error"].notna()] if "error" in mine else mine.iloc[0:0]
    buckets = ok.reindex(columns=_BUCKET_COLS).sort_values(["start_ledger_id", "end_ledger_id"])
    buckets = buckets.reset_index(drop=True)
    seg_rows: list[dict[str, Any]] = []
    for r in ok.to_dict("records"):
        for s in r.get("segments") if r.get("segments") is not None else []:
            seg_rows.append({**dict(s), "ledger_id": r["ledger_id"], "start_ledger_id": r["start_ledger_id"]})
    segments = pd.DataFrame(seg_rows, columns=_SEGMENT_COLS)
    last_end = int(buckets["end_ledger_id"].max()) if not buckets.empty else None
    return BucketView(managed_ledger, cursor, buckets, segments, errors.reset_index(drop=True), last_end)


@dataclass(frozen=True)
class MergePrediction:
    """The pair the tracker merges next, or why none is due."""

    due: bool
    reason: str
    pair: tuple[int, int] | None = None  # snapshot ledger ids (older, newer)
    index_count: int = 0
    candidates: pd.DataFrame | None = None  # every adjacent pair with its index count, fewest first


def next_merge(view: BucketView, max_num_buckets: int) -> MergePrediction:
    """The broker's next merge with ``delayedDeliveryMaxNumBuckets = max_num_buckets``.

    A merge is due while the immutable buckets outnumber ``max_num_buckets`` (``-1`` or ``0``:
    never); it combines the adjacent pair (by ledger range) with the fewest delayed indexes.
    """
    b = view.buckets
    pairs = pd.DataFrame(
        {
            "older": b["ledger_id"].iloc[:-1].to_numpy(),
            "newer": b["ledger_id"].iloc[1:].to_numpy(),
            "start_ledger_id": b["start_ledger_id"].iloc[:-1].to_numpy(),
            "end_ledger_id": b["end_ledger_id"].iloc[1:].to_numpy(),
            "index_count": (b["index_count"].iloc[:-1].to_numpy() + b["index_count"].iloc[1:].to_numpy()),
        }
    ).sort_values(["index_count", "start_ledger_id"], kind="stable")
    if max_num_buckets is None or max_num_buckets <= 0:
        return MergePrediction(
            False, "delayedDeliveryMaxNumBuckets is not set: buckets are never merged", None, 0, pairs
        )
    if len(b) <= max_num_buckets:
        return MergePrediction(
            False, f"{len(b)} buckets, at most {max_num_buckets} allowed: no merge due", None, 0, pairs
        )
    top = pairs.iloc[0]
    reason = (
        f"{len(b)} buckets exceed delayedDeliveryMaxNumBuckets={max_num_buckets}: the adjacent pair with the "
        f"fewest indexes ({int(top['index_count'])}) is merged next"
    )
    return MergePrediction(
        True, reason, (int(top["older"]), int(top["newer"])), int(top["index_count"]), pairs
    )


def far_future_holders(
    view: BucketView, now_ms: int, *, horizon_ms: int = 24 * 3600 * 1000, max_share: float = 0.1
) -> pd.DataFrame:
    """Buckets held alive by a few far-future messages.

    A bucket is flagged when its segments due within ``horizon_ms`` of ``now_ms`` hold most of its
    indexes, while a small share (at most ``max_share``) is due later: those few keep the whole
    snapshot (bytes, bitmaps) until they are delivered. Columns: ``ledger_id, far_indexes,
    index_count, share, snapshot_bytes, kept_until_ms``.
    """
    cols = ["ledger_id", "far_indexes", "index_count", "share", "snapshot_bytes", "kept_until_ms"]
    s = view.segments
    if s.empty:
        return pd.DataFrame(columns=cols)
    cutoff = now_ms + horizon_ms
    far = s[s["min_schedule_ms"] > cutoff].groupby("ledger_id")["index_count"].sum()
    out = view.buckets[["ledger_id", "index_count", "snapshot_bytes", "max_schedule_ms"]].copy()
    out["far_indexes"] = out["ledger_id"].map(far).fillna(0).astype("int64")
    out["share"] = out["far_indexes"] / out["index_count"].where(out["index_count"] > 0)
    out["kept_until_ms"] = out["max_schedule_ms"]
    flagged = out[(out["far_indexes"] > 0) & (out["share"] <= max_share)]
    return flagged.reindex(columns=cols).sort_values("snapshot_bytes", ascending=False).reset_index(drop=True)


def memory_estimate(view: BucketView, now_ms: int) -> dict[str, int]:
    """Estimated broker memory (bytes) of this subscription's sealed buckets, bucket vs in-memory tracker.

    ``bucket_tracker``: bitmaps of the segments not yet due plus the indexes of one loaded segment
    per bucket (the one due next); ``in_memory_tracker``: every index not yet due in the priority
    queue (:data:`INDEX_BYTES` each). The last mutable bucket is the same in both and left out.
    """
    s = view.segments
    if s.empty:
        return {"bucket_tracker": 0, "in_memory_tracker": 0, "indexes": 0}
    pending = s[s["max_schedule_ms"] > now_ms]
    loaded = pending.sort_values("segment").groupby("ledger_id").head(1)
    bucket = int(pending["bitmap_bytes"].sum()) + int(loaded["index_count"].sum()) * INDEX_BYTES
    n = int(pending["index_count"].sum())
    return {"bucket_tracker": bucket, "in_memory_tracker": n * INDEX_BYTES, "indexes": n}
