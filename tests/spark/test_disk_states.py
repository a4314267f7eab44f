"""Disk usage by state (``audit.disk``) on a small hand-built inventory, audited by the real rules.

One namespace per state, so each ledger's state is asserted on its own; the findings are the ones
``run_audit`` reports on that inventory (the states reuse them, they do not decide again). Then the
partition property: every ``bk_ledgers`` ledger in exactly one state, the bytes adding up to the sum
of lengths, also replicated by each ledger's write quorum.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from ledgerlens.audit import run_audit
from ledgerlens.audit.disk import COLUMNS, STATES, disk_usage, ledger_states, summary_of_usage
from ledgerlens.inventory import schemas
from ledgerlens.report.disk import (
    OTHER_NAMESPACES,
    STATE_COLORS,
    STATE_LABELS,
    TOP_NAMESPACES,
    disk_figure,
    disk_states_html,
    disk_table_html,
)
from ledgerlens.report.metrics import render
from ledgerlens.report.text import human_bytes
from ledgerlens.runtime.console import disk_line
from ledgerlens.settings.config import AuditConfig

pytestmark = [pytest.mark.spark, pytest.mark.unit]

NOW = 1_800_000_000_000
H = 3_600_000
D = 24 * H
OLD = NOW - 30 * D
CFG = AuditConfig(as_of_ms=NOW)  # orphan age 24 h, retention 0 / 0 by default, lag 4 h, cursor idle 7 d

LIVE = "t/live/persistent/a"  # consumed, live, open
RET = "t/ret/persistent/b"  # retention overdue (default retention 0 / 0)
IDLE = "t/idle/persistent/c"  # a cursor idle for 30 days
OFF = "t/off/persistent/d"  # offloaded, BookKeeper copy not deleted
NOCUR = "t/nocur/persistent/e"  # no cursor: everything before the current ledger is consumed
BROKEN = "t/broken/persistent/f"  # a cursor that does not decode: nothing known consumed


def _ns(name: str) -> tuple[str, str]:
    parts = name.split("/")
    return parts[0], "/".join(parts[:2])


def bk(lid: int, ml: str | None, length: int, **kw: Any) -> dict[str, Any]:
    row = {"ledger_id": lid, "path": f"/ledgers/L{lid:010d}", "state": "CLOSED", "length": length,
           "ctime_ms": OLD, "application": "pulsar", "component": "managed-ledger", "managed_ledger": ml,
           "write_quorum": 2, "ensemble_size": 3}  # fmt: skip
    return {**row, **kw}


def topic(name: str, specs: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The managed ledger and its ledger list (oldest first, the last one current)."""
    t, ns = _ns(name)
    node = {"managed_ledger": name, "path": f"/managed-ledgers/{name}", "tenant": t, "namespace": ns}
    rows = []
    for i, s in enumerate(specs):
        last = i == len(specs) - 1
        row = {"managed_ledger": name, "tenant": t, "namespace": ns, "position": i, "is_last": last,
               "size": 100, "entries": 10, "timestamp_ms": 0 if last else OLD}  # fmt: skip
        rows.append({**row, **s})
    return node, rows


def cur(name: str, cursor: str, mdl: int | None, **kw: Any) -> dict[str, Any]:
    t, ns = _ns(name)
    row = {"managed_ledger": name, "tenant": t, "namespace": ns, "cursor": cursor, "cursor_node": cursor,
           "path": f"/managed-ledgers/{name}/{cursor}", "cursors_ledger_id": -1,
           "mark_delete_ledger_id": mdl, "mark_delete_entry_id": 0, "last_active_ms": NOW - H}  # fmt: skip
    return {**row, **kw}


def pol(ns: str, minutes: int, mb: int) -> dict[str, Any]:
    return {"tenant": ns.split("/")[0], "namespace": ns, "path": f"/admin/policies/{ns}",
            "retention_minutes": minutes, "retention_mb": mb}  # fmt: skip


def obj(key: str, uuid: str, lid: int, role: str) -> dict[str, Any]:
    return {"bucket": "tier", "key": key, "size": 10, "last_modified_ms": OLD, "uuid": uuid, "ledger_id": lid,
            "role": role, "layout": "ledger"}  # fmt: skip


EXPECTED: dict[int, tuple[str, str]] = {  # ledger id -> (state, namespace)
    10: ("consumed_in_retention", "t/live"),
    11: ("live_unconsumed", "t/live"),  # the slowest cursor's mark-delete ledger: partly unconsumed
    12: ("open", "t/live"),  # the current ledger, open in BookKeeper
    13: ("open", "t/live"),  # not the current one, still in recovery: open whatever the cursors say
    20: ("retention_overdue", "t/ret"),
    21: ("retention_overdue", "t/ret"),
    22: ("live_unconsumed", "t/ret"),  # the current ledger, closed in BookKeeper
    30: ("inactive_cursor", "t/idle"),
    31: ("inactive_cursor", "t/idle"),
    32: ("open", "t/idle"),
    40: ("orphan", "t/gone"),
    41: ("foreign", "x/ns"),
    42: ("unattributed", ""),
    50: ("offloaded_not_deleted", "t/off"),
    51: ("live_unconsumed", "t/off"),
    60: ("other", "t/live"),  # a cursor ledger
    61: ("other", "t/live"),  # a schema ledger
    62: ("other", "t/young"),  # unreferenced, younger than the orphan age: no finding
    63: ("other", ""),  # metadata that does not decode
    64: ("other", "t/live"),  # a compacted ledger
    70: ("consumed_in_retention", "t/nocur"),
    71: ("live_unconsumed", "t/nocur"),
    80: ("live_unconsumed", "t/broken"),
    81: ("live_unconsumed", "t/broken"),
}


def _rows() -> dict[str, list[dict[str, Any]]]:
    mls, mll = [], []
    for name, specs in (
        (LIVE, [{"ledger_id": i} for i in (10, 11, 13, 12)]),
        (RET, [{"ledger_id": i} for i in (20, 21, 22)]),
        (IDLE, [{"ledger_id": i} for i in (30, 31, 32)]),
        (OFF, [{"ledger_id": 50, "offload_uuid": "u50", "offload_complete": True,
                "offload_timestamp_ms": OLD}, {"ledger_id": 51}]),
        (NOCUR, [{"ledger_id": 70}, {"ledger_id": 71}]),
        (BROKEN, [{"ledger_id": 80}, {"ledger_id": 81}]),
    ):  # fmt: skip
        node, rows = topic(name, specs)
        mls.append(node)
        mll += rows
    bks = [
        bk(10, LIVE, 1000),
        bk(11, LIVE, 2000),
        bk(12, LIVE, 0, state="OPEN", ctime_ms=NOW - H),
        bk(13, LIVE, 0, state="IN_RECOVERY", ctime_ms=NOW - H),
        bk(20, RET, 3000),
        bk(21, RET, 4000, write_quorum=None),  # replicated: counted once
        bk(22, RET, 500),
        bk(30, IDLE, 5000),
        bk(31, IDLE, 6000, write_quorum=3),
        bk(32, IDLE, 0, state="OPEN", ctime_ms=NOW - H),
        bk(40, "t/gone/persistent/x", 7000),  # no such managed ledger: an orphan of an owned tenant
        bk(41, "x/ns/persistent/y", 8000),  # tenant x in no Pulsar table: another cluster's
        bk(42, None, 9000, application=None, component=None),
        bk(50, OFF, 10_000),
        bk(51, OFF, 600),
        bk(60, LIVE, 700, cursor="sub"),
        bk(61, None, 800, component="schema", schema_id="t/live/a"),
        bk(62, "t/young/persistent/z", 900, ctime_ms=NOW - H),
        {"ledger_id": 63, "path": "/ledgers/L0000000063", "error": "truncated protobuf"},
        bk(64, None, 1100, component="compacted-ledger", compacted_topic="persistent://t/live/a"),
        bk(70, NOCUR, 1200),
        bk(71, NOCUR, 1300),
        bk(80, BROKEN, 1400),
        bk(81, BROKEN, 1500),
    ]
    curs = [
        cur(LIVE, "sub", 11, cursors_ledger_id=60, properties={"CompactedTopicLedger": 64}),
        cur(LIVE, "__compaction", 12, properties={"CompactedTopicLedger": 64}),
        cur(RET, "sub", 22),
        cur(IDLE, "idle", 30, last_active_ms=OLD),
        cur(IDLE, "busy", 32),
        cur(OFF, "sub", 51),
        cur(BROKEN, "sub", 81),
        {"managed_ledger": BROKEN, "tenant": "t", "namespace": "t/broken", "cursor": "bad",
         "cursor_node": "bad", "path": f"/managed-ledgers/{BROKEN}/bad", "error": "truncated protobuf"},
    ]  # fmt: skip
    return {
        "bk_ledgers": bks,
        "managed_ledgers": mls,
        "ml_ledgers": mll,
        "cursors": curs,
        "schema_ledgers": [{"schema_id": "t/live/a", "path": "/schemas/t/live/a", "tenant": "t",
                            "namespace": "t/live", "version": 0, "ledger_id": 61, "is_latest": True}],
        "namespace_policies": [pol(ns, -1, -1) for ns in ("t/live", "t/idle", "t/off", "t/nocur",
                                                          "t/broken")],
        "offload_objects": [obj("u50-ledger-50", "u50", 50, "data"),
                            obj("u50-ledger-50-index", "u50", 50, "index")],
    }  # fmt: skip


@pytest.fixture(scope="module")
def audited(spark: Any) -> tuple[dict[str, Any], Any, dict[str, list[dict[str, Any]]]]:
    rows = _rows()
    tables = {
        name: spark.createDataFrame([schemas.to_row(schema, r) for r in rows.get(name, [])], schema)
        for name, schema in schemas.INVENTORY.items()
    }
    findings = run_audit(tables, CFG, offload_bucket="tier").cache()
    return tables, findings, rows


def test_each_ledger_gets_the_state_its_finding_or_its_inventory_gives(audited: Any) -> None:
    tables, findings, _ = audited
    kinds = {(r["kind"], r["ledger_id"]) for r in findings.select("kind", "ledger_id").collect()}
    # the rules' verdicts this inventory is built to produce (the states reuse them)
    for kind, lid in [("orphan_ledger", 40), ("foreign_ledger", 41), ("unattributed_ledger", 42),
                      ("offloaded_not_deleted", 50), ("retention_overdue", 20), ("retention_overdue", 21),
                      ("inactive_cursor", None), ("corrupt_metadata", 63)]:  # fmt: skip
        assert (kind, lid) in kinds, kinds
    got = {r["ledger_id"]: (r["state"], r["namespace"]) for r in ledger_states(tables, findings).collect()}
    assert got == EXPECTED


def test_states_partition_the_inventory_total(audited: Any) -> None:
    tables, findings, rows = audited
    df = disk_usage(tables, findings)
    assert tuple(df.columns) == COLUMNS
    assert set(df["state"]) == set(STATES)  # every state is exercised
    lengths = {r["ledger_id"]: r.get("length") or 0 for r in rows["bk_ledgers"]}
    assert int(df["bytes"].sum()) == sum(lengths.values())
    assert int(df["ledgers"].sum()) == len(lengths)
    assert not df.duplicated(["tenant", "namespace", "state"]).any()
    for state in STATES:  # each state's bytes are its ledgers' lengths
        ids = [lid for lid, (s, _) in EXPECTED.items() if s == state]
        assert int(df.loc[df["state"] == state, "bytes"].sum()) == sum(lengths[i] for i in ids), state
    live = df[(df["namespace"] == "t/live")].set_index("state")
    assert (live.loc["open", "ledgers"], live.loc["open", "bytes"]) == (2, 0)  # open: counted, length 0
    assert live.loc["other", "tenant"] == "t" and live.loc["other", "bytes"] == 700 + 800 + 1100
    summary = summary_of_usage(df)
    assert summary["total_bytes"] == sum(lengths.values()) and summary["replicated"] is False
    assert list(summary["by_state"]) == list(STATES)  # type: ignore[arg-type]


def test_replicated_bytes_multiply_each_length_by_its_write_quorum(audited: Any) -> None:
    tables, findings, rows = audited
    df = disk_usage(tables, findings, replicated=True)
    expected = sum((r.get("length") or 0) * (r.get("write_quorum") or 1) for r in rows["bk_ledgers"])
    assert int(df["bytes"].sum()) == expected
    ret = df[(df["namespace"] == "t/ret") & (df["state"] == "retention_overdue")]
    assert int(ret["bytes"].sum()) == 3000 * 2 + 4000  # write quorum unknown: one copy
    idle = df[(df["namespace"] == "t/idle") & (df["state"] == "inactive_cursor")]
    assert int(idle["bytes"].sum()) == 5000 * 2 + 6000 * 3


def test_the_report_knows_every_state() -> None:
    assert tuple(STATE_COLORS) == STATES and set(STATE_LABELS) == set(STATES)


def test_the_views_show_the_same_total(audited: Any) -> None:
    tables, findings, rows = audited
    df = disk_usage(tables, findings)
    total = sum(r.get("length") or 0 for r in rows["bk_ledgers"])
    table = disk_table_html(df)
    assert f'<th>total</th><th class="ll-num">{len(rows["bk_ledgers"])}</th>' in table
    assert f'<th class="ll-num">{human_bytes(total)}</th>' in table
    assert all(f"<code>{s}</code>" in table for s in STATES)
    glance = disk_states_html(df)
    assert f"<strong>{human_bytes(total)}</strong> in BookKeeper" in glance
    assert "held by an inactive cursor" in glance and "open (being written)" not in glance  # no bytes
    fig = disk_figure(df)
    assert sum(sum(t.x) for t in fig.data) == total
    assert [t.name for t in fig.data] == [STATE_LABELS[s] for s in STATES]  # one colour per state
    summary = {"disk_usage": summary_of_usage(df)}
    line = disk_line(summary)
    assert line is not None and line.startswith(f"disk: {human_bytes(total)} in BookKeeper (one copy): ")
    assert "8.8 KiB unattributed" in line  # 9000 bytes, among the largest states
    metrics = render(summary, cluster="c", success=True, last_success_s=0.0)
    gauges = dict(ln.rsplit(" ", 1) for ln in metrics.splitlines() if ln.startswith("ledgerlens_bookkeeper_"))
    assert gauges['ledgerlens_bookkeeper_bytes{cluster="c",state="orphan"}'] == "7000"
    assert sum(int(v) for v in gauges.values()) == total


def test_the_figure_keeps_the_largest_namespaces() -> None:
    df = pd.DataFrame(
        [("t", f"t/ns{i:02d}", "live_unconsumed", 1, (i + 1) * 1024) for i in range(20)]
        + [("", "", "other", 2, 10)],
        columns=list(COLUMNS),
    )
    fig = disk_figure(df)
    names = list(fig.layout.yaxis.categoryarray)
    assert len(names) == TOP_NAMESPACES + 1 and names[0] == OTHER_NAMESPACES and names[-1] == "t/ns19"
    assert sum(sum(t.x) for t in fig.data) == int(df["bytes"].sum())
    assert fig.layout.xaxis.ticktext[1].endswith("KiB")  # binary units
    assert disk_figure(df.iloc[:0]).layout.annotations[0].text == "No BookKeeper bytes"
