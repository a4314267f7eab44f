"""PIP-195 bucket snapshots the real broker wrote, read over the bookie protocol (v3 and v2).

The seeding produced a known schedule of delayed messages (``seed.json`` ``delayed_schedule``: ledger,
entry and deliver-at of every delayed message; plain messages between them are never indexed). Every
bucket the broker sealed must hold exactly the delayed messages of its ledger range, none of which is
due yet; the Spark stage must read the same; the planted bucket failures are seen from both sides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledgerlens.formats import delayed_bucket as db
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.managed_ledger import decode_cursor
from ledgerlens.formats.names import topic_to_managed_ledger
from ledgerlens.formats.paths import ledger_path
from ledgerlens.settings.config import BookieSource
from ledgerlens.sources.bookie import BookieClient, LedgerHandle
from ledgerlens_sandbox import seed as sd
from ledgerlens_sandbox.pulsar import admin, make_client, topic_path

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

CURSOR = f"/managed-ledgers/{topic_to_managed_ledger(sd.TOPIC_DELAYED)}/delayed-sub"


def _buckets(zk: Any, path: str) -> dict[str, int]:
    return decode_cursor(zk.get(path)[0], path=path).delayed_bucket_ledgers


def _handle(zk: Any, ledger_id: int) -> LedgerHandle:
    p = ledger_path(ledger_id)
    return LedgerHandle(ledger_id, decode_ledger_metadata(zk.get(p)[0], path=p))


def _read_bucket(client: BookieClient, h: LedgerHandle) -> tuple[list[db.SegmentMetadata], list[list[Any]]]:
    entries = list(client.read_entries(h, 0, h.metadata.last_entry_id))
    metas = db.decode_snapshot_metadata(entries[0].payload, where=f"ledger {h.ledger_id} entry 0")
    segs = [
        db.decode_snapshot_segment(e.payload, where=f"ledger {h.ledger_id} entry {e.entry_id}")
        for e in entries[1:]
    ]
    return metas, [[(i.ledger_id, i.entry_id, i.timestamp_ms) for i in s] for s in segs]


@pytest.mark.parametrize("protocol", ["v3", "v2"])
def test_snapshots_hold_exactly_the_scheduled_messages(pulsar_env: Any, protocol: str) -> None:
    schedule = [tuple(x) for x in pulsar_env.seeded["delayed_schedule"][sd.TOPIC_DELAYED]]
    assert len(schedule) == 270  # 300 messages, every 10th plain
    zk = sd.zk_client(pulsar_env.state)
    buckets = _buckets(zk, CURSOR)
    handles = {lid: _handle(zk, lid) for lid in buckets.values()}
    assert len(buckets) >= 2
    covered = set()
    # the standalone's bookie id is not host:port: its address comes from /ledgers/available
    with BookieClient(BookieSource(protocol=protocol, read_timeout_s=10), zk=zk) as client:
        for key, lid in sorted(buckets.items()):
            h = handles[lid]
            assert (
                h.metadata.state == "CLOSED"
                and h.metadata.custom_text()["component"] == "delayed-index-bucket"
            )
            rng = db.parse_bucket_key(key)
            assert rng is not None
            metas, segments = _read_bucket(client, h)
            assert len(metas) == len(segments) == h.metadata.last_entry_id >= 1
            expected = {s for s in schedule if rng.start_ledger_id <= s[0] <= rng.end_ledger_id}
            got = [i for seg in segments for i in seg]
            assert len(got) == len(set(got)) and set(got) == expected, key
            for meta, seg in zip(metas, segments, strict=True):
                assert meta.min_schedule_ms == min(t for _, _, t in seg)
                assert meta.max_schedule_ms == max(t for _, _, t in seg)
                assert {(lid_, e) for lid_, es in meta.entries_by_ledger.items() for e in es} == {
                    (lid_, e) for lid_, e, _ in seg
                }
            covered |= expected
        assert client.stats.errors == {} and client.stats.failovers == 0
        if protocol == "v2":
            assert client.stats.v2_fallbacks == 0  # asked for v2 directly
    zk.stop()
    zk.close()
    # what no sealed bucket holds is in the last (mutable, in-memory) bucket: the newest ledgers
    rest = [s for s in schedule if s not in covered]
    newest_sealed = max(db.parse_bucket_key(k).end_ledger_id for k in buckets)  # type: ignore[union-attr]
    assert all(s[0] > newest_sealed for s in rest)


def test_bucket_inventory_stage(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    """The Spark stage reads the same buckets, sees the planted dangling property, reads positions."""
    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.settings.config import ZooKeeperSource

    state = pulsar_env.state
    # the seeding unloaded the compacted topic (its __compaction cursor is closed, no cursor ledger):
    # one more compaction loads it, and the new reference lives in the cursor ledger only
    client = make_client(state)
    try:
        sd.produce(client, sd.TOPIC_COMPACTED, 10, prefix="b", keys=10)
    finally:
        client.close()
    sd.compact_and_wait(state["web_url"], sd.TOPIC_COMPACTED)
    inv = collect_inventory(
        spark,
        ZooKeeperSource(hosts=state["zookeeper_hosts"]),
        None,
        str(tmp_path / "inv"),
        progress=False,
        bookie=BookieSource(),
    )
    rows = spark.read.parquet(inv.tables["bucket_snapshots"]).toPandas()
    schedule = [tuple(x) for x in pulsar_env.seeded["delayed_schedule"][sd.TOPIC_DELAYED]]
    mine = rows[rows["path"] == CURSOR]
    assert len(mine) >= 2 and mine["error"].isna().all()
    for r in mine.to_dict("records"):
        n = sum(1 for s in schedule if r["start_ledger_id"] <= s[0] <= r["end_ledger_id"])
        assert r["index_count"] == n and r["segment_count"] == len(r["segments"]) >= 1
        assert all(s["index_count"] == s["bitmap_count"] for s in r["segments"])
        assert r["snapshot_bytes"] > r["metadata_bytes"] > 0
    truth = {f["kind"]: f for f in pulsar_env.truth["expected"] if f["component"] == "delayed-index-bucket"}
    dangling = rows[rows["ledger_id"] == truth["missing_ledger"]["ledger_id"]]
    assert list(dangling["error_kind"]) == ["missing"]
    assert not (rows["ledger_id"] == truth["orphan_ledger"]["ledger_id"]).any()  # no property names it
    assert inv.counts["bucket_snapshots"] == len(rows)
    positions = spark.read.parquet(inv.tables["cursor_positions"]).toPandas()
    # a cursor ledger may roll over (every 10 acknowledgements) while it is read; none is corrupt
    assert len(positions) >= 5 and not (positions["error_kind"] == "corrupt").any()
    ml = topic_to_managed_ledger(sd.TOPIC_COMPACTED)
    comp = positions[(positions["managed_ledger"] == ml) & (positions["cursor"] == "__compaction")]
    assert len(comp) == 1 and comp.iloc[0]["compacted_ledger_id"] > pulsar_env.seeded["compacted_ledger"]
    # unloaded again: the cursor znode names the new compacted ledger, as the other tests expect
    admin(state["web_url"], "PUT", topic_path(sd.TOPIC_COMPACTED) + "/unload", ok=(200, 204))


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "delayed_buckets.ipynb"


def test_notebook_is_stored_without_outputs() -> None:
    import nbformat
    import papermill as pm

    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    params = pm.inspect_notebook(str(NOTEBOOK))
    for name in ("cluster", "sandbox", "zookeeper", "topic_filter", "subscription", "max_num_buckets"):
        assert params[name]["help"], name


@pytest.mark.notebooks
def test_notebook_on_the_sandbox(pulsar_env: Any, tmp_path: Path) -> None:
    """The runbook, headless, against the real broker's buckets; the HTML report opens offline."""
    from ledgerlens import report

    out = report.execute_runbook(
        NOTEBOOK,
        tmp_path / "delayed_buckets.ipynb",
        {
            "cluster": "sandbox",
            "sandbox": str(pulsar_env.box.workdir),
            "topic_filter": "ll-app/delayed",
            "subscription": "delayed-sub",
            "max_num_buckets": 2,
            "out_dir": str(tmp_path / "out"),
            "interactive": False,
        },
    )
    results = report.read_recorded(out, "buckets")
    assert [(r["managed_ledger"], r["cursor"]) for r in results] == [
        (topic_to_managed_ledger(sd.TOPIC_DELAYED), "delayed-sub")
    ]
    schedule = [tuple(x) for x in pulsar_env.seeded["delayed_schedule"][sd.TOPIC_DELAYED]]
    got = results[0]["buckets"]
    assert len(got) >= 2
    for b in got:
        assert b["index_count"] == sum(
            1 for s in schedule if b["start_ledger_id"] <= s[0] <= b["end_ledger_id"]
        )
    if len(got) > 2:  # more buckets than max_num_buckets=2: a merge of the smallest adjacent pair
        pair = results[0]["next_merge"]
        sums = {
            (a["ledger_id"], b["ledger_id"]): a["index_count"] + b["index_count"]
            for a, b in zip(got, got[1:], strict=False)
        }
        assert pair is not None and sums[tuple(pair)] == min(sums.values())
    # every 37th message is due in 30 days: buckets holding one are kept alive by it
    assert results[0]["far_future"]
    html = report.to_html(out, tmp_path / "report.html")
    text = html.read_text()
    assert report.external_scripts(text) == [] and "Delayed-index buckets" in text
