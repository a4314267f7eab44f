"""PIP-195 buckets: snapshot decoding, the analysis (merge, far-future holders, memory), figures, widget."""

from __future__ import annotations

import pandas as pd
import pytest

from ledgerlens.buckets import far_future_holders, memory_estimate, next_merge, subscription_view
from ledgerlens.buckets.figures import buckets_figure, deliverable_figure, schedule_figure
from ledgerlens.errors import DecodeError
from ledgerlens.formats import delayed_bucket as db

pytestmark = pytest.mark.unit

H = 3600 * 1000
NOW = 1_800_000_000_000


def test_bucket_key():
    assert db.parse_bucket_key("#pulsar.internal.delayed.bucket_12_30") == db.BucketKey(12, 30)
    assert db.bucket_key(12, 30) == "#pulsar.internal.delayed.bucket_12_30"
    for bad in ("#pulsar.internal.delayed.bucket_12", "#pulsar.internal.delayed.bucket_a_2", "other_1_2"):
        assert db.parse_bucket_key(bad) is None


def test_snapshot_round_trip_and_corruption():
    segs = [
        [db.DelayedIndex(NOW + 10, 5, 1), db.DelayedIndex(NOW + 20, 5, 3), db.DelayedIndex(NOW + 20, 6, 0)],
        [db.DelayedIndex(NOW + 99, 6, 4)],
    ]
    entries = db.encode_snapshot(segs)
    metas = db.decode_snapshot_metadata(entries[0], where="ledger 9 entry 0")
    assert [m.segment for m in metas] == [1, 2]
    assert metas[0].entries_by_ledger == {5: (1, 3), 6: (0,)} and metas[0].index_count == 3
    assert (metas[0].min_schedule_ms, metas[0].max_schedule_ms) == (NOW + 10, NOW + 20)
    assert db.decode_snapshot_segment(entries[2], where="x") == segs[1]
    with pytest.raises(DecodeError, match="ledger 9 entry 1"):
        db.decode_snapshot_metadata(b"\xff\xff\xff", where="ledger 9 entry 1")
    from ledgerlens.proto import delayed_index_bucket_pb2 as pb

    bad = pb.SnapshotMetadata()
    m = bad.metadata_list.add(min_schedule_timestamp=1, max_schedule_timestamp=2)
    m.delayed_index_bit_map[5] = b"not a bitmap"
    with pytest.raises(DecodeError, match="RoaringBitmap"):
        db.decode_snapshot_metadata(bad.SerializeToString(), where="ledger 9 entry 0")


def _row(lid: int, start: int, end: int, segments: list[tuple[int, int, int]], cursor: str = "sub") -> dict:
    segs = [
        {
            "segment": i + 1,
            "min_schedule_ms": lo,
            "max_schedule_ms": hi,
            "index_count": n,
            "bitmap_count": n,
            "bitmap_bytes": 10 * n,
            "segment_bytes": 30 * n,
            "data_ledgers": [start],
        }
        for i, (lo, hi, n) in enumerate(segments)
    ]
    return {
        "managed_ledger": "t/ns/persistent/x",
        "cursor": cursor,
        "ledger_id": lid,
        "start_ledger_id": start,
        "end_ledger_id": end,
        "property_key": db.bucket_key(start, end),
        "segment_count": len(segs),
        "index_count": sum(s["index_count"] for s in segs),
        "snapshot_bytes": 100 + sum(s["segment_bytes"] for s in segs),
        "min_schedule_ms": min(s["min_schedule_ms"] for s in segs),
        "max_schedule_ms": max(s["max_schedule_ms"] for s in segs),
        "segments": segs,
        "error": None,
    }


@pytest.fixture
def snapshots() -> pd.DataFrame:
    rows = [
        _row(100, 10, 12, [(NOW + H, NOW + 2 * H, 40)]),
        _row(101, 13, 15, [(NOW + H, NOW + H, 10), (NOW + 30 * 24 * H, NOW + 30 * 24 * H, 1)]),
        _row(102, 16, 18, [(NOW + 3 * H, NOW + 4 * H, 3)]),
        _row(103, 19, 20, [(NOW + 5 * H, NOW + 6 * H, 50)]),
        {
            **_row(104, 21, 22, [(NOW, NOW, 1)]),
            "error": "bookie x: ledger 104 entry 1: bad",
            "segments": None,
        },
    ]
    return pd.DataFrame(rows)


def test_view_and_next_merge(snapshots):
    view = subscription_view(snapshots, "t/ns/persistent/x", "sub")
    assert list(view.buckets["ledger_id"]) == [100, 101, 102, 103]
    assert len(view.errors) == 1 and view.mutable_from_ledger_id == 20
    assert len(view.segments) == 5
    none = next_merge(view, -1)
    assert not none.due and none.pair is None and "never merged" in none.reason
    assert not next_merge(view, 4).due
    merge = next_merge(view, 3)
    # adjacent pairs: 100+101 = 51, 101+102 = 14, 102+103 = 53: the fewest indexes go first
    assert merge.due and merge.pair == (101, 102) and merge.index_count == 14
    assert list(merge.candidates["index_count"]) == [14, 51, 53]


def test_far_future_holders_and_memory(snapshots):
    view = subscription_view(snapshots, "t/ns/persistent/x", "sub")
    far = far_future_holders(view, NOW, horizon_ms=24 * H)
    assert list(far["ledger_id"]) == [101] and far.iloc[0]["far_indexes"] == 1
    assert far.iloc[0]["index_count"] == 11
    mem = memory_estimate(view, NOW)
    assert mem["indexes"] == 104
    assert mem["in_memory_tracker"] == 104 * 24
    # bitmaps of all pending segments + the first pending segment of each bucket loaded
    assert mem["bucket_tracker"] == 1040 + (40 + 10 + 3 + 50) * 24
    assert memory_estimate(view, NOW + 31 * 24 * H) == {
        "bucket_tracker": 0,
        "in_memory_tracker": 0,
        "indexes": 0,
    }


def test_figures_as_data(snapshots):
    view = subscription_view(snapshots, "t/ns/persistent/x", "sub")
    fig = buckets_figure(view, next_merge(view, 3))
    bar = fig.data[0]
    assert list(bar.y) == [40, 11, 3, 50] and list(bar.customdata) == [100, 101, 102, 103]
    assert list(bar.marker.color).count("#e67e22") == 2  # the merge pair
    assert any("last mutable bucket" in (a.text or "") for a in fig.layout.annotations)
    sched = schedule_figure(view, NOW)
    assert len(sched.data) == 4 and sched.data[1].name == "bucket 101"
    deliverable = deliverable_figure(view)
    assert list(deliverable.data[0].y)[-1] == 104
    empty = subscription_view(snapshots, "t/ns/persistent/x", "nobody")
    assert buckets_figure(empty).layout.annotations[0].text == "no sealed bucket"


def test_widget_driven_headless(snapshots):
    from ledgerlens_widgets import BucketExplorer

    other = pd.DataFrame([_row(200, 1, 2, [(NOW + H, NOW + H, 7)], cursor="other")])
    ex = BucketExplorer(pd.concat([snapshots, other]), subscription="sub", max_num_buckets=3, now_ms=NOW)
    assert ex.value is not None and ex.value.cursor == "sub"
    assert ex.merge is not None and ex.merge.pair == (101, 102)
    assert "merged" in ex.summary.value and "far-future" in ex.summary.value
    assert "could not be read" in ex.summary.value
    ex.max_buckets.value = -1
    assert ex.merge is not None and not ex.merge.due
    ex.choice.value = "t/ns/persistent/x / other"
    assert ex.value.cursor == "other" and set(ex.figures) == {"buckets", "schedule", "deliverable"}
    assert BucketExplorer(snapshots.iloc[0:0]).value is None
