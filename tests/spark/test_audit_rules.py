"""The audit rules of docs/audit-rules.md on small, hand-built inventories.

Four inventories, each audited once (Spark actions are the cost here):

- ``main``: every rule's positive case, its threshold boundary (just inside / just outside) and
  negative controls, each scenario in its own namespace so the assertions stay separate;
- ``main`` without ``offload_objects``: the offload rules are silent, the others unchanged;
- ``blind``: undecodable metadata hides what it may own;
- ``healthy``: a consistent cluster gives no finding at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest

from ledgerlens.audit import run_audit, summarize
from ledgerlens.audit.findings import PULSAR_KINDS as KINDS
from ledgerlens.audit.findings import REVERIFICATION_KINDS
from ledgerlens.inventory import schemas
from ledgerlens.settings.config import AuditConfig

pytestmark = [pytest.mark.spark, pytest.mark.unit]

NOW = 1_800_000_000_000
H = 3_600_000
D = 24 * H
MB = 1024 * 1024
OLD = NOW - 30 * D
CFG = AuditConfig(as_of_ms=NOW)  # orphan 24h, incomplete 24h, lag 4h, retention 0/0, grace 6h, 7d, 7d
OFFLOAD_KINDS = {
    "orphan_offload_object",
    "missing_offload_object",
    "incomplete_offload",
    "offloaded_not_deleted",
}


# --------------------------------------------------------------------------------------------------
# Inventory builders: one dict per row, unspecified columns null
# --------------------------------------------------------------------------------------------------


def _ns(name: str) -> tuple[str, str]:
    parts = name.split("/")
    return parts[0], "/".join(parts[:2])


def bk(lid: int, ml: str | None = None, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "ledger_id": lid,
        "path": f"/ledgers/L{lid:010d}",
        "state": "CLOSED",
        "length": 100,
        "ctime_ms": OLD,
        "application": "pulsar",
        "component": "managed-ledger",
        "managed_ledger": ml,
    }
    row.update(kw)
    return row


def ml(name: str, **kw: Any) -> dict[str, Any]:
    t, ns = _ns(name)
    return {"managed_ledger": name, "path": f"/managed-ledgers/{name}", "tenant": t, "namespace": ns, **kw}


def ledgers(name: str, *specs: dict[str, Any]) -> list[dict[str, Any]]:
    """ml_ledgers rows of one managed ledger, oldest first; the last one ``is_last``."""
    t, ns = _ns(name)
    out = []
    for i, s in enumerate(specs):
        row = {"managed_ledger": name, "tenant": t, "namespace": ns, "position": i}
        row.update({"is_last": i == len(specs) - 1, "size": 100, "entries": 10})
        row["timestamp_ms"] = 0 if row["is_last"] else OLD
        row.update(s)
        out.append(row)
    return out


def cur(name: str, cursor: str, mdl: int | None, **kw: Any) -> dict[str, Any]:
    t, ns = _ns(name)
    row = {
        "managed_ledger": name,
        "tenant": t,
        "namespace": ns,
        "cursor": cursor,
        "cursor_node": cursor,
        "path": f"/managed-ledgers/{name}/{cursor}",
        "cursors_ledger_id": -1,
        "mark_delete_ledger_id": mdl,
        "mark_delete_entry_id": 0,
        "last_active_ms": NOW - H,
    }
    row.update(kw)
    return row


def pol(ns: str, minutes: int | None, mb: int | None, **kw: Any) -> dict[str, Any]:
    return {
        "tenant": ns.split("/")[0],
        "namespace": ns,
        "path": f"/admin/policies/{ns}",
        "retention_minutes": minutes,
        "retention_mb": mb,
        **kw,
    }


def schema_ref(schema_id: str, lid: int | None, **kw: Any) -> dict[str, Any]:
    t, ns = _ns(schema_id)
    row = {"schema_id": schema_id, "path": f"/schemas/{schema_id}", "tenant": t, "namespace": ns}
    return {**row, "version": 0, "ledger_id": lid, "is_latest": True, **kw}


def obj(key: str, uuid: str, lid: int | None, role: str = "data", **kw: Any) -> dict[str, Any]:
    layout = "ledger" if lid is not None else "streaming"
    row = {"bucket": "tier", "key": key, "size": 10, "last_modified_ms": OLD, "uuid": uuid, "ledger_id": lid,
           "role": role, "layout": layout}  # fmt: skip
    row.update(kw)
    return row


def pair(uuid: str, lid: int, **kw: Any) -> list[dict[str, Any]]:
    """The data and index objects of a per-ledger offload."""
    data = f"{uuid}-ledger-{lid}"
    return [obj(data, uuid, lid, "data", **kw), obj(f"{data}-index", uuid, lid, "index", **kw)]


def offloaded(uuid: str, ts: int = OLD, **kw: Any) -> dict[str, Any]:
    return {"offload_uuid": uuid, "offload_complete": True, "offload_timestamp_ms": ts, **kw}


def build(spark: Any, rows: Mapping[str, list[dict[str, Any]]], *, objects: bool = True) -> dict[str, Any]:
    """Inventory DataFrames with the declared schemas (absent columns null)."""
    out = {}
    for name, schema in schemas.INVENTORY.items():
        if name == "offload_objects" and not objects:
            continue
        data = [schemas.to_row(schema, r) for r in rows.get(name, [])]
        out[name] = spark.createDataFrame(data, schema)
    return out


def audit(spark: Any, rows: Mapping[str, list[dict[str, Any]]], **kw: Any) -> list[dict[str, Any]]:
    objects = kw.pop("objects", True)
    df = run_audit(build(spark, rows, objects=objects), CFG, **kw)
    assert df.schema == schemas.FINDINGS
    return [r.asDict() for r in df.collect()]


def of(findings: list[dict[str, Any]], kind: str) -> dict[Any, dict[str, Any]]:
    """Findings of one kind keyed by ledger id (or object key / cursor when that identifies them)."""
    out: dict[Any, dict[str, Any]] = {}
    for f in findings:
        if f["kind"] != kind:
            continue
        key = f["object_key"] or (f["cursor"] if kind == "inactive_cursor" else None) or f["ledger_id"]
        if kind == "corrupt_metadata":
            key = f["path"]
        assert key not in out, f"duplicate {kind} {key}"
        out[key] = f
    return out


def ev(f: dict[str, Any]) -> dict[str, Any]:
    return json.loads(f["evidence"])


# --------------------------------------------------------------------------------------------------
# The main inventory
# --------------------------------------------------------------------------------------------------

LIVE = "o/ns/persistent/live"
MISS = "m/ns/persistent/t"
RET = "r/ns/persistent/"
IDLE = "i/ns/persistent/t"
OFF = "f/ns/persistent/t"
STREAM = "f/ns/persistent/st"
YOUNG_OPEN = {"state": "OPEN", "ctime_ms": NOW - H}
EMPTIED = "o/ns/persistent/emptied"
FRESH = "o/ns/persistent/fresh"


def _main_rows() -> dict[str, list[dict[str, Any]]]:
    bks: list[dict[str, Any]] = []
    mls: list[dict[str, Any]] = []
    mll: list[dict[str, Any]] = []
    curs: list[dict[str, Any]] = []
    objs: list[dict[str, Any]] = []
    pols = [pol(ns, -1, -1) for ns in ("o/ns", "m/ns", "p/ns", "i/ns", "f/ns", "r/inf")]
    pols += [pol("r/ns", 60, -1), pol("r/size", -1, 1), pol("e/ns", None, None, error="truncated JSON")]

    # orphans and unattributed ledgers
    bks += [
        bk(100, "o/ns/persistent/gone"),  # owner gone
        bk(101, LIVE, cursor="sub"),  # cursor ledger the cursor no longer references
        bk(102, component="schema", schema_id="o/ns/old"),
        bk(103, component="compacted-ledger", compacted_topic="persistent://o/ns/live"),
        bk(
            104,
            component="delayed-index-bucket",
            delayed_topic="persistent://o/ns/live",
            delayed_cursor="sub",
        ),
        bk(105, "o/ns/persistent/gone", ctime_ms=NOW - D),  # exactly min_orphan_age: reported
        bk(106, "o/ns/persistent/gone", ctime_ms=NOW - D + 1),  # young orphan: silent
        bk(107, application=None, component=None),  # unattributed
        bk(108, application=None, component=None),  # unattributed but referenced: silent
        bk(109, application="other", component=None, ctime_ms=NOW - D + 1),  # young: silent
        bk(115, component="schema", schema_id="s/ns/bad"),  # schema locator undecodable: silent
        {"ledger_id": 116, "path": "/ledgers/L0000000116", "error": "bad protobuf"},  # corrupt
        bk(117, component=None),  # pulsar, owner unknown, a (schema) blind spot exists: silent
        bk(118, "x/ns/persistent/t"),  # tenant x in no Pulsar table: another cluster's, foreign_ledger
        bk(120, LIVE),
    ]
    mls.append(ml(LIVE))
    mll += ledgers(LIVE, {"ledger_id": 108}, {"ledger_id": 120})
    curs.append(cur(LIVE, "sub", 120))

    # missing ledgers
    mls.append(ml(MISS))
    mll += ledgers(
        MISS,
        {"ledger_id": 200},  # absent from BookKeeper
        {"ledger_id": 201, **offloaded("u201", offload_bookkeeper_deleted=True)},  # lives in S3
        {"ledger_id": 202},
    )
    objs += pair("u201", 201)
    bks.append(bk(202, MISS, **YOUNG_OPEN))
    curs.append(
        cur(
            MISS,
            "c1",
            202,
            cursors_ledger_id=203,
            properties={"CompactedTopicLedger": 116},
            cursor_properties={"#pulsar.internal.delayed.bucket_1_2": "205", "other": "999"},
        )  # fmt: skip
    )
    schema_rows = [schema_ref("m/ns/t", 204), schema_ref("s/ns/bad", None, error="bad SchemaLocator")]

    # open ledgers
    for name, lid, b in (
        ("open1", 300, {"state": "OPEN", "ctime_ms": NOW - 7 * D}),  # exactly the limit: reported
        ("open2", 301, {"state": "OPEN", "ctime_ms": NOW - 7 * D + 1}),
        ("closed", 302, {}),
    ):
        mls.append(ml(f"p/ns/persistent/{name}"))
        mll += ledgers(f"p/ns/persistent/{name}", {"ledger_id": lid, "size": 50})
        bks.append(bk(lid, f"p/ns/persistent/{name}", **b))

    # retention (r/ns: 60 minutes)
    def topic(name: str, specs: list[dict[str, Any]], cursors: list[tuple[str, int]] = ()) -> None:  # type: ignore[assignment]
        mls.append(ml(name))
        mll.extend(ledgers(name, *specs))
        for s in specs:
            last = s is specs[-1]
            bks.append(bk(s["ledger_id"], name, **(YOUNG_OPEN if last else {})))
        curs.extend(cur(name, c, m) for c, m in cursors)

    topic(RET + "walk", [{"ledger_id": 400}, {"ledger_id": 401, "timestamp_ms": NOW - 30 * 60_000},
                         {"ledger_id": 402}, {"ledger_id": 403}], [("s", 403)])  # fmt: skip
    grace = [
        {"ledger_id": 410, "timestamp_ms": NOW - 6 * H},
        {"ledger_id": 411, "timestamp_ms": NOW - 6 * H + 1},
    ]
    topic(RET + "grace", [*grace, {"ledger_id": 412}], [("s", 412)])
    topic(RET + "slow", [{"ledger_id": i} for i in (420, 421, 422, 423)], [("a", 422), ("b", 421)])
    topic(RET + "nocursor", [{"ledger_id": 430}, {"ledger_id": 431}])
    topic("r/inf/persistent/t", [{"ledger_id": 440}, {"ledger_id": 441}])  # -1: infinite
    topic("r/size/persistent/t", [{"ledger_id": 450, "size": MB}, {"ledger_id": 451, "size": 1},
                                  {"ledger_id": 452, "size": 0}])  # fmt: skip
    topic("r/size/persistent/t2", [{"ledger_id": 455, "size": MB}, {"ledger_id": 456, "size": 0}])  # == quota
    topic("r/dflt/persistent/t", [{"ledger_id": 480}, {"ledger_id": 481}])  # no policies: defaults 0/0
    topic("e/ns/persistent/t", [{"ledger_id": 470}, {"ledger_id": 471}])  # policies undecodable: silent

    # inactive cursors
    topic(
        IDLE,
        [{"ledger_id": 500, "size": 100}, {"ledger_id": 501, "size": 200}, {"ledger_id": 502, "size": 300}],
    )
    curs += [
        cur(IDLE, "idle", 501, last_active_ms=NOW - 7 * D),  # exactly the limit: reported
        cur(IDLE, "recent", 500, last_active_ms=NOW - 7 * D + 1),
        cur(IDLE, "zero", 500, last_active_ms=0),
        cur(IDLE, "caught-up", 502, last_active_ms=OLD),  # holds only the last ledger
    ]

    # offload (default lag 4h, audited bucket "tier")
    mls += [ml(OFF), ml(STREAM)]
    mll += ledgers(
        OFF,
        {"ledger_id": 600, **offloaded("u600", NOW - 4 * H - 1)},  # lag passed by 1 ms
        {"ledger_id": 601, **offloaded("u601", NOW - 4 * H)},  # lag not passed
        {"ledger_id": 602, **offloaded("u602")},  # index object absent
        {"ledger_id": 603, **offloaded("u603", offload_bookkeeper_deleted=True)},  # both absent, BK gone
        {"ledger_id": 604, **offloaded("u604", offload_bucket="other")},  # another bucket: unchecked
        {"ledger_id": 605, "offload_uuid": "u605", "offload_complete": False},
        {"ledger_id": 606, "offload_uuid": "u606", "offload_complete": False},
        {"ledger_id": 607},
    )
    bks += [bk(i, OFF) for i in (600, 601, 602, 604, 605, 606)] + [bk(607, OFF, **YOUNG_OPEN)]
    objs += pair("u600", 600) + pair("u601", 601) + pair("u602", 602)[:1]
    objs += [obj("u605-ledger-605", "u605", 605, last_modified_ms=NOW - D)]  # exactly the limit
    objs += [obj("u606-ledger-606", "u606", 606, last_modified_ms=NOW - D + 1)]
    objs += pair("u999", 999) + pair("u998", 998, last_modified_ms=NOW - D + 1) + pair("u600old", 600)[:1]
    seg = [{"uuid": "s1", "complete": True}]
    mll += ledgers(
        STREAM,
        {"ledger_id": 610, **offloaded(None), "offload_segments": seg},
        {"ledger_id": 611, **offloaded(None), "offload_segments": [{"uuid": "s2", "complete": True}]},
        {"ledger_id": 612},
    )
    bks.append(bk(612, STREAM, **YOUNG_OPEN))
    objs += [obj("s1", "s1", None), obj("s1-index", "s1", None, "index"), obj("s2", "s2", None)]
    objs += [obj("s9", "s9", None)]  # streaming object no segment references

    # suspicious metadata: a node emptied by an edit (version 3, 0 bytes) that an older ledger still
    # names; a node created empty (version 0) is not suspicious; a NoAuth node is unreadable
    mls += [
        ml(EMPTIED, compression="EMPTY", ledger_count=0, znode_version=3, znode_mtime_ms=NOW - 2 * D),
        ml(FRESH, compression="EMPTY", ledger_count=0, znode_version=0, znode_mtime_ms=NOW - 2 * D),
    ]
    bks += [
        bk(130, EMPTIED),  # older than the rewrite: orphan with the caveat, never delete_ledger
        bk(132, FRESH),  # a plain orphan
        {"ledger_id": 118, "path": "/ledgers/L0000000118", "error": "NoAuthError: ((), {})"},
    ]

    return {
        "bk_ledgers": bks,
        "managed_ledgers": mls,
        "ml_ledgers": mll,
        "cursors": curs,
        "schema_ledgers": schema_rows,
        "namespace_policies": pols,
        "offload_objects": objs,
    }


@pytest.fixture(scope="module")
def main_rows() -> dict[str, list[dict[str, Any]]]:
    return _main_rows()


@pytest.fixture(scope="module")
def main(spark: Any, main_rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return audit(spark, main_rows, offload_bucket="tier")


def test_findings_are_sorted_typed_and_of_known_kinds(main: list[dict[str, Any]]) -> None:
    # the verified-object kinds need an offload_segments table: tests/integration/test_offload_verify.py
    assert {f["kind"] for f in main} == set(KINDS) - set(REVERIFICATION_KINDS) - {"corrupt_offload_object"}
    rank = {"critical": 0, "warning": 1, "info": 2}
    keys = [(rank[f["severity"]], f["kind"], f["managed_ledger"] or "", f["ledger_id"] or -1) for f in main]
    assert keys == sorted(keys)
    assert all(f["action"] in schemas.ACTIONS for f in main)
    assert all(isinstance(ev(f), dict) for f in main)


def test_orphan_ledgers(main: list[dict[str, Any]]) -> None:
    got = of(main, "orphan_ledger")
    assert set(got) == {100, 101, 102, 103, 104, 105, 130, 132}
    comp = {k: (f["component"], f["managed_ledger"], f["cursor"]) for k, f in got.items()}
    assert comp == {
        130: ("managed-ledger", EMPTIED, None),
        132: ("managed-ledger", FRESH, None),
        100: ("managed-ledger", "o/ns/persistent/gone", None),
        101: ("cursor", LIVE, "sub"),
        102: ("schema", None, None),
        103: ("compacted-ledger", LIVE, None),
        104: ("delayed-index-bucket", LIVE, "sub"),
        105: ("managed-ledger", "o/ns/persistent/gone", None),
    }
    f = got[100]
    assert (f["severity"], f["action"], f["bytes"], f["path"]) == (
        "warning",
        "delete_ledger",
        100,
        "/ledgers/L0000000100",
    )
    assert (f["tenant"], f["namespace"], f["age_seconds"]) == ("o", "o/ns", 30 * 86400)
    assert ev(f)["owner_exists"] is False and ev(f)["ctime_ms"] == OLD
    assert ev(got[101])["owner_exists"] is True and ev(got[101])["owner_path"] == f"/managed-ledgers/{LIVE}"
    assert ev(got[102])["schema_id"] == "o/ns/old"


def test_unattributed_ledgers(main: list[dict[str, Any]]) -> None:
    got = of(main, "unattributed_ledger")
    assert set(got) == {107}  # 108 is referenced, 109 is young
    assert (got[107]["severity"], got[107]["component"], got[107]["action"]) == ("info", None, "none")


def test_missing_ledgers(main: list[dict[str, Any]]) -> None:
    got = of(main, "missing_ledger")
    # 201/603/610/611 are offloaded-complete; 116 has a (corrupt) BookKeeper row
    assert set(got) == {200, 203, 204, 205}
    assert all(f["severity"] == "critical" and f["action"] == "investigate" for f in got.values())
    assert (got[200]["component"], got[200]["path"], got[200]["bytes"]) == (
        "managed-ledger", f"/managed-ledgers/{MISS}", 100)  # fmt: skip
    assert ev(got[200])["owner_path"] == f"/managed-ledgers/{MISS}"
    assert (got[203]["component"], got[203]["cursor"], got[203]["path"]) == (
        "cursor", "c1", f"/managed-ledgers/{MISS}/c1")  # fmt: skip
    assert (got[204]["component"], got[204]["path"], got[204]["namespace"]) == (
        "schema",
        "/schemas/m/ns/t",
        "m/ns",
    )
    assert got[205]["component"] == "delayed-index-bucket"
    assert ev(got[205])["property"] == "#pulsar.internal.delayed.bucket_1_2"


def test_open_ledger_overdue(main: list[dict[str, Any]]) -> None:
    got = of(main, "open_ledger_overdue")
    assert set(got) == {300}
    f = got[300]
    assert (f["managed_ledger"], f["bytes"], f["age_seconds"], f["path"]) == (
        "p/ns/persistent/open1", 50, 7 * 86400, "/managed-ledgers/p/ns/persistent/open1")  # fmt: skip


def test_retention_walk(main: list[dict[str, Any]]) -> None:
    got = of(main, "retention_overdue")
    # walk: 401 is within retention, so 402 is kept although expired; grace: 411 is 1 ms too young;
    # slow: cursor b at 421; size: 450 alone exceeds 1 MB with what follows, 455 only equals it;
    # r/inf: -1 is infinite; e/ns: policies undecodable
    assert set(got) == {400, 410, 420, 430, 450, 480}
    assert all(f["action"] == "load_topic" and f["component"] == "managed-ledger" for f in got.values())
    e = ev(got[420])
    assert (e["per"], e["slowest_ledger_id"], e["slowest_cursor"], e["retention_minutes"]) == (
        "ledger",
        421,
        "b",
        60,
    )
    e = ev(got[450])
    assert (e["retention_mb"], e["retention_minutes"], e["over_size"], e["size_from_here"]) == (
        1,
        -1,
        True,
        MB + 1,
    )
    assert (ev(got[480])["retention_minutes"], ev(got[480])["retention_mb"]) == (0, 0)
    assert got[400]["path"] == f"/managed-ledgers/{RET}walk" and got[400]["age_seconds"] == 30 * 86400


def test_inactive_cursor(main: list[dict[str, Any]]) -> None:
    got = of(main, "inactive_cursor")
    assert set(got) == {"idle"}
    f = got["idle"]
    assert (f["bytes"], f["path"], f["ledger_id"], f["age_seconds"]) == (
        200,
        f"/managed-ledgers/{IDLE}/idle",
        None,
        7 * 86400,
    )
    assert ev(f)["per"] == "cursor" and ev(f)["held_ledgers"] == 1


def test_corrupt_metadata(main: list[dict[str, Any]]) -> None:
    got = of(main, "corrupt_metadata")
    assert set(got) == {"/ledgers/L0000000116", "/schemas/s/ns/bad", "/admin/policies/e/ns"}
    assert {p: (f["component"], ev(f)["table"]) for p, f in got.items()} == {
        "/ledgers/L0000000116": (None, "bk_ledgers"),
        "/schemas/s/ns/bad": ("schema", "schema_ledgers"),
        "/admin/policies/e/ns": (None, "namespace_policies"),
    }
    assert ev(got["/ledgers/L0000000116"])["problem"] == "bad protobuf"
    assert got["/ledgers/L0000000116"]["ledger_id"] == 116


def test_suspicious_metadata(main: list[dict[str, Any]]) -> None:
    emptied = [f for f in main if f["kind"] == "emptied_managed_ledger"]
    assert [
        (f["managed_ledger"], f["path"], f["severity"], f["action"], f["component"]) for f in emptied
    ] == [(EMPTIED, f"/managed-ledgers/{EMPTIED}", "warning", "investigate", "managed-ledger")]
    e = ev(emptied[0])
    assert (e["path"], e["znode_version"], e["data_bytes"], e["owned_ledgers"], e["owned_bytes"]) == (
        f"/managed-ledgers/{EMPTIED}",
        3,
        0,
        1,
        100,
    )
    orphans = of(main, "orphan_ledger")
    caveated = ev(orphans[130])
    assert orphans[130]["action"] == "investigate"
    assert caveated["owner_emptied"] is True and caveated["owner_znode_version"] == 3
    assert "do not delete" in caveated["caveat"] and caveated["ctime_ms"] == OLD  # the rule's evidence kept
    assert orphans[132]["action"] == "delete_ledger" and "owner_emptied" not in ev(orphans[132])
    assert not [f for f in main if f["managed_ledger"] == EMPTIED and f["action"] == "delete_ledger"]
    unreadable = [f for f in main if f["kind"] == "unreadable_metadata"]
    assert [(f["path"], f["severity"], f["ledger_id"], f["action"]) for f in unreadable] == [
        ("/ledgers/L0000000118", "critical", 118, "investigate")
    ]
    assert ev(unreadable[0])["problem"].startswith("NoAuthError")
    assert "ZooKeeper authentication" in ev(unreadable[0])["hint"]
    assert "never command-line parameters" in ev(unreadable[0])["hint"]


def test_offload_rules(main: list[dict[str, Any]]) -> None:
    orphans = of(main, "orphan_offload_object")
    assert set(orphans) == {"u999-ledger-999", "u999-ledger-999-index", "u600old-ledger-600", "s9"}
    assert orphans["s9"]["ledger_id"] is None and orphans["u999-ledger-999"]["action"] == "delete_object"
    missing = of(main, "missing_offload_object")
    assert {k: f["severity"] for k, f in missing.items()} == {
        "u602-ledger-602-index": "warning",
        "u603-ledger-603": "critical",
        "u603-ledger-603-index": "critical",
        "s2-index": "critical",
    }
    assert missing["s2-index"]["ledger_id"] == 611 and missing["u603-ledger-603"]["managed_ledger"] == OFF
    incomplete = of(main, "incomplete_offload")
    assert set(incomplete) == {"u605-ledger-605"}
    assert incomplete["u605-ledger-605"]["bytes"] == 10 and ev(incomplete["u605-ledger-605"])["keys"] == [
        "u605-ledger-605"
    ]
    ond = of(main, "offloaded_not_deleted")
    assert set(ond) == {600}  # 601: lag not passed; 602: object missing; 604: other bucket
    assert (ond[600]["bytes"], ond[600]["action"], ev(ond[600])["offload_deletion_lag_ms"]) == (
        100,
        "load_topic",
        4 * H,
    )


def test_without_offload_objects_only_offload_rules_are_silent(
    spark: Any, main: list[dict[str, Any]], main_rows: dict[str, list[dict[str, Any]]]
) -> None:
    got = audit(spark, main_rows, objects=False)
    assert not {f["kind"] for f in got} & OFFLOAD_KINDS
    assert got == [f for f in main if f["kind"] not in OFFLOAD_KINDS]


def test_interpreted_small_audit_finds_what_the_compiled_plan_finds(
    spark: Any, main: list[dict[str, Any]], main_rows: dict[str, list[dict[str, Any]]]
) -> None:
    """A small inventory's audit interprets its expressions (``spark.sized_for``) and plans the
    ledger rules as one step; the compiled plan (``main``) finds exactly the same."""
    from ledgerlens.runtime.spark import sized_for

    with sized_for(spark, 100) as applied:
        assert applied["spark.sql.codegen.factoryMode"] == "NO_CODEGEN"
        assert audit(spark, main_rows, offload_bucket="tier") == main


def test_large_audit_joins_only_the_ledgers_a_rule_reads(
    spark: Any, monkeypatch: pytest.MonkeyPatch, main_rows: dict[str, list[dict[str, Any]]]
) -> None:
    """A large audit decides the BookKeeper join on narrow columns first and joins whole only the
    ledger ids it selected (``rules.join_candidates``), and reads the ledgers of idle cursors from
    those it picked for the retention walk; it finds exactly what a small audit's one whole join
    finds, rows with a null ledger id included (they never match, so each is unmatched in both plans)."""
    from pyspark.sql import functions as F

    from ledgerlens.audit import id_filter, rules
    from ledgerlens.audit.rules import planner

    rows = {k: list(v) for k, v in main_rows.items()}
    rows["ml_ledgers"] += ledgers("m/ns/persistent/nullid", {"ledger_id": None}, {"ledger_id": 9001})
    rows["bk_ledgers"] += [
        bk(9001, "m/ns/persistent/nullid"),
        {**bk(0), "ledger_id": None, "error": "bad path"},
    ]
    restricted: list[bool] = []  # per reading of the managed-ledger references: to chosen ids?
    read = rules.ManagedLedgerReferences.of

    def spied(self: Any, only: Any = None) -> Any:
        restricted.append(only is not None)
        return read(self, only)

    picked: list[bool] = []  # per audit: the idle cursors' ledgers read from the walk's picked rows?
    also_read = rules.ManagedLedgerReferences.also_read_rows

    def spied_also(self: Any) -> Any:
        rows = also_read(self)
        picked.append(rows is not None)
        return rows

    monkeypatch.setattr(rules.ManagedLedgerReferences, "of", spied)
    monkeypatch.setattr(rules.ManagedLedgerReferences, "also_read_rows", spied_also)
    monkeypatch.setattr(planner, "TWO_PHASE_BYTES", math.inf)  # small, whatever Catalyst estimates
    small = audit(spark, rows, offload_bucket="tier")
    assert restricted == [False] and picked == [False]
    monkeypatch.setattr(planner, "TWO_PHASE_BYTES", 0)  # as large as a 10M-ledger inventory
    decided: list[bool] = []  # per two-phase audit: decided by slot masks (dense ids), or by a join?
    dense = rules.dense_ids

    def spied_dense(bk_ledgers: Any, id_range: Any = None) -> bool:
        # the range comes from the facts job (no job of its own), and it is BookKeeper's
        got = bk_ledgers.agg(F.min("ledger_id"), F.max("ledger_id"), F.count("ledger_id")).first()
        assert id_range == tuple(got) and id_range[2] > 0, (id_range, got)
        decided.append(dense(bk_ledgers, id_range))
        return decided[-1]

    monkeypatch.setattr(planner, "dense_ids", spied_dense)
    monkeypatch.setattr(planner, "DENSE_IDS", 0)  # no range of ids is dense: decided by a narrow join
    by_join = audit(spark, rows, offload_bucket="tier")
    monkeypatch.setattr(planner, "DENSE_IDS", math.inf)  # every range of ids is dense: by slot masks
    by_masks = audit(spark, rows, offload_bucket="tier")
    monkeypatch.setattr(id_filter, "MASK_SLOTS", 0)  # chosen ids wider than any bitmap: a semi-join
    by_wide_masks = audit(spark, rows, offload_bucket="tier")
    assert decided == [False, True, True]
    # decided on narrow columns, then joined whole for the chosen ids
    assert restricted == [False, True, True, True] and picked == [False, True, True, True]
    monkeypatch.setattr(planner, "CANDIDATES_BROADCAST_ROWS", -1)  # too many chosen: one whole join
    one_join = audit(spark, rows, offload_bucket="tier")
    assert restricted == [False, True, True, True, False]
    assert by_join == by_masks == by_wide_masks == one_join == small
    two_phase = by_masks
    assert any(f["kind"] == "inactive_cursor" for f in small)
    nulls = [f for f in two_phase if f["kind"] == "missing_ledger" and f["ledger_id"] is None]
    assert [f["managed_ledger"] for f in nulls] == ["m/ns/persistent/nullid"]
    assert len({f["kind"] for f in two_phase}) >= 10


def test_the_joined_rows_read_are_declared_for_every_kind_of_the_join() -> None:
    """What the planner reads of the join is derived from ``conditions.SELECTIONS``: each kind the
    ledger rules emit (``audit/rules/ledgers.py``) is read through exactly one selection that every
    audit reads, and the offload rules' kinds through the one read only when offloads are checked."""
    from ledgerlens.audit.rules.conditions import OFFLOAD_RULE, SELECTIONS, in_plan
    from ledgerlens.report import kinds

    def covered(selections: Any) -> list[str]:
        return sorted(k.name for s in selections for k in s.kinds)

    of_join = sorted(k.name for k in kinds.PULSAR if k.rule == kinds.ledgers.ORPHAN_LEDGER.rule)
    offload = sorted(k.name for k in kinds.PULSAR if k.rule == OFFLOAD_RULE)
    assert len(of_join) == 6 and offload
    assert covered(in_plan(offload=False)) == of_join  # each once
    assert covered(in_plan(offload=True)) == sorted(of_join + offload)
    assert covered(SELECTIONS) == sorted(of_join + offload)


def test_slot_masks_select_the_ledger_ids_the_join_selects(spark: Any) -> None:
    """``rules.selected_slots`` (one aggregation by slot of 64 ids, no join) selects exactly the ids
    that the narrow join of the two-phase audit selects, over random rows of both sides: null,
    negative and extreme ids, slot edges, ids on one side, on both, twice, and every condition."""
    import random

    from pyspark.sql import types as T

    from ledgerlens.audit import id_filter, rules

    rnd = random.Random(186)
    pool = [None, -(1 << 63), (1 << 63) - 1, -65, -64, -63, -1, 0, 1, 62, 63, 64, 65, 127, 128, 4095, 4096]
    pool += [rnd.randrange(0, 5000) for _ in range(300)]
    age = [NOW, OLD, NOW - 2 * D, None]
    bk_rows = [
        bk(
            lid,
            state=rnd.choice(["OPEN", "CLOSED", None]),
            ctime_ms=rnd.choice(age),
            error=rnd.choice([None, "bad"]),
        )
        for lid in pool
        for _ in range(rnd.choice([0, 1, 1, 1, 2]))
    ]
    ml_schema = schemas.INVENTORY["ml_ledgers"]
    ref_schema = T.StructType(
        [
            T.StructField("ledger_id", T.LongType()),
            T.StructField("ref_component", T.StringType()),
            T.StructField("offload_uuid", T.StringType()),
            T.StructField("offload_complete", T.BooleanType()),
            ml_schema["offload_segments"],
            T.StructField("ret_overdue", T.BooleanType()),
        ]
    )
    ref_rows = [
        (
            lid,
            rnd.choice(["managed-ledger", "managed-ledger", "cursor", "schema"]),
            rnd.choice([None, "u"]),
            rnd.choice([None, True, False]),
            rnd.choice([None, [], [{"uuid": "s", "complete": True}]]),
            rnd.choice([None, True, False]),
        )
        for lid in pool
        for _ in range(rnd.choice([0, 1, 1, 2]))
    ]
    bk_df = build(spark, {"bk_ledgers": bk_rows})["bk_ledgers"]
    refs = spark.createDataFrame(ref_rows, ref_schema)

    def ids(df: Any) -> list[int]:  # a real id of -2^63 is read as a null one too: a set
        return sorted({r["c_id"] for r in df.collect()})

    for offload in (False, True):
        joined = rules.join_bookkeeper(bk_df, refs).filter(rules.selected(CFG, offload=offload))
        expected = ids(rules.id_keys(joined))
        assert len(expected) > 50 and id_filter.NULL_ID in expected
        slots = rules.selected_slots(bk_df, refs, CFG, offload=offload).toArrow()
        assert sorted(set(id_filter.ids_of(slots).tolist())) == expected


def test_the_bitmap_and_the_semi_join_read_the_rows_of_the_chosen_ids(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``id_filter.from_slots`` keeps exactly the rows whose ledger id was chosen (null ids where the
    null slot was), as a bitmap and, for ids spread wider than one, as a semi-join: negative and
    extreme ids, slot edges, and ids whose slot, cast to an int, would wrap into the bitmap."""
    import random

    import numpy as np
    import pyarrow as pa

    from ledgerlens.audit import id_filter

    rnd = random.Random(186)
    edges = [-(1 << 63), (1 << 63) - 1, -65, -64, -63, -1, 0, 1, 3, 62, 63, 64, 65, 127, 128, 4095, 4096]
    wraps = [(1 << 32 << 6) + 3, ((1 << 32) + 1 << 6) + 1]  # slot 2^32 (+1): int 0 (1) once cast
    pool = [None, *edges, *wraps, *(rnd.randrange(-3000, 9000) for _ in range(400))]
    frame = spark.createDataFrame(list(enumerate(pool)), "row long, ledger_id long")
    small = sorted({i for i in pool if i is not None and -3000 <= i < 9000})

    def slots_of(chosen: set[int], nulls: bool) -> Any:
        masks: dict[int, int] = {}
        for i in chosen:
            masks[i >> 6] = masks.get(i >> 6, 0) | 1 << (i & 63)
        rows = [(s, m - (1 << 64) if m >= 1 << 63 else m) for s, m in masks.items()]
        rows += [(None, 1)] if nulls else []
        return pa.table({"slot": pa.array([r[0] for r in rows], pa.int64()), "chosen": [r[1] for r in rows]})

    cases = [
        ({0, 1, 3, 63, 64, 127, *rnd.sample(small, 150)}, True),
        ({-65, -64, -1, 4095, 4096, *rnd.sample(small, 100)}, False),
        ({-(1 << 63), (1 << 63) - 1, 0}, True),  # wider than the bitmap whatever its size
        (set(), True),
        (set(), False),
    ]
    for chosen, nulls in cases:
        slots = slots_of(chosen, nulls)
        assert set(id_filter.ids_of(slots).tolist()) == (chosen | ({id_filter.NULL_ID} if nulls else set()))
        expected = sorted(r for r, i in enumerate(pool) if (i is None and nulls) or i in chosen)
        # the semi-join reads a real id of -2^63 as a null one too (both sides alike: only read more)
        also = {*expected, *(r for r, i in enumerate(pool) if i == id_filter.NULL_ID and nulls)}
        for mask_slots in (1 << 22, 0):  # a bitmap where the chosen slots fit; else a semi-join
            monkeypatch.setattr(id_filter, "MASK_SLOTS", mask_slots)
            picked = id_filter.from_slots(spark, slots, len(chosen) + nulls)
            assert picked is not None
            got = sorted(r["row"] for r in picked(frame).collect())
            assert got == expected if mask_slots else set(expected) <= set(got) <= also, (chosen, nulls)
        if chosen:
            assert id_filter.from_slots(spark, slots, len(chosen) + nulls - 1) is None
    assert np.array_equal(id_filter.ids_of(slots_of({5}, False)), [5])


def _without_probed_rows(
    rows: Mapping[str, list[dict[str, Any]]], *, corrupt: bool
) -> dict[str, list[dict[str, Any]]]:
    """``rows`` without what the audit probes for before planning a rule that only some clusters
    need: corrupt rows (``corrupt``), else PIP-76 segments and streaming objects, ``__compaction``
    cursors, idle cursors (all active now), bucket ledgers without their topic and emptied
    managed-ledger nodes."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, table in rows.items():
        if corrupt:
            out[name] = [r for r in table if not r.get("error")]
            continue
        kept = list(table)
        if name == "ml_ledgers":
            kept = [r for r in kept if not r.get("offload_segments")]
        if name == "offload_objects":
            kept = [r for r in kept if r.get("ledger_id") is not None]
        if name == "cursors":
            kept = [{**r, "last_active_ms": CFG.as_of_ms} for r in kept if r.get("cursor") != "__compaction"]
        if name == "managed_ledgers":
            kept = [r for r in kept if r.get("compression") != "EMPTY"]
        if name == "bk_ledgers":
            kept = [r for r in kept if r.get("component") != "delayed-index-bucket" or r.get("delayed_topic")]
        out[name] = kept
    return out


@pytest.mark.parametrize("corrupt", [True, False], ids=["no-corrupt-rows", "no-rows-of-optional-rules"])
def test_rules_left_out_for_want_of_rows_change_no_finding(
    spark: Any, main_rows: dict[str, list[dict[str, Any]]], corrupt: bool
) -> None:
    """The facts job probes for the rows a rule needs; a rule without any is left out of the plan.
    Its findings were provably none: the whole plan finds exactly the same."""
    from dataclasses import replace

    from ledgerlens.audit import rules, suspicious
    from ledgerlens.audit.references import BUCKET_OWNERS
    from ledgerlens.audit.run import inventory_facts

    tables = build(spark, _without_probed_rows(main_rows, corrupt=corrupt))
    facts = inventory_facts(tables, CFG)
    if corrupt:
        left_out = [look.name for look in rules.corrupt_looks()]
    else:
        left_out = [rules.STREAMING, rules.COMPACTION, rules.IDLE, BUCKET_OWNERS, suspicious.EMPTIED]
    assert all(facts.counts[name] == 0 and not facts.has(name) for name in left_out), facts.counts
    lean = [r.asDict() for r in run_audit(tables, CFG, offload_bucket="tier", facts=facts).collect()]
    whole = run_audit(tables, CFG, offload_bucket="tier", facts=replace(facts, counts={}))  # nothing left out
    assert len(lean) > 20
    assert {f["kind"] for f in lean} >= ({"orphan_offload_object"} if corrupt else {"unreadable_metadata"})
    assert lean == [r.asDict() for r in whole.collect()]


def test_summarize(spark: Any, main: list[dict[str, Any]]) -> None:
    df = spark.createDataFrame([schemas.to_row(schemas.FINDINGS, f) for f in main], schemas.FINDINGS)
    s = summarize(df)
    assert s["total_findings"] == len(main)
    assert s["counts_by_kind"]["orphan_ledger"] == 8  # 100-105, and 130 (owner emptied), 132
    assert s["bytes_by_kind"]["orphan_ledger"] == 800
    assert sum(s["counts_by_severity"].values()) == len(main)


# --------------------------------------------------------------------------------------------------
# Blind spots
# --------------------------------------------------------------------------------------------------


def test_blind_spots_hide_what_they_may_own(spark: Any) -> None:
    rows = {
        "managed_ledgers": [
            ml("b/ns/persistent/broken", error="bad 0x4778 envelope"),
            {"managed_ledger": "c/ns", "path": "/managed-ledgers/c/ns", "error": "cannot list"},  # a subtree
            ml("b/ns/persistent/cur"),
        ],
        "cursors": [
            {
                **cur("b/ns/persistent/cur", None, None),
                "path": "/managed-ledgers/b/ns/persistent/cur/s",
                "error": "bad ManagedCursorInfo",
            }
        ],  # fmt: skip
        "ml_ledgers": ledgers("b/ns/persistent/cur", {"ledger_id": 710}, {"ledger_id": 711}),
        "bk_ledgers": [
            bk(700, "b/ns/persistent/broken"),
            bk(702, "c/ns/persistent/any"),
            bk(703, "b/ns/persistent/broken2"),  # a name prefix, not a path prefix: still an orphan
            bk(704, "b/ns/persistent/cur", cursor="s"),
            bk(705, component=None),  # owner unknown while blind spots exist
            bk(706, component="compacted-ledger", compacted_topic="persistent://c/ns/x"),
            bk(710, "b/ns/persistent/cur"),
            bk(711, "b/ns/persistent/cur", **YOUNG_OPEN),
        ],
        "namespace_policies": [pol("b/ns", 60, -1), pol("c/ns", 60, -1)],  # 710 would be overdue
        "offload_objects": pair("zz", 1),  # owner unknown here: re-verification decides
    }
    got = audit(spark, rows)
    assert sorted((f["kind"], f["ledger_id"] or f["path"]) for f in got) == [
        ("corrupt_metadata", "/managed-ledgers/b/ns/persistent/broken"),
        ("corrupt_metadata", "/managed-ledgers/b/ns/persistent/cur/s"),
        ("corrupt_metadata", "/managed-ledgers/c/ns"),
        # orphan object candidates: their owner is known only from the object's user metadata,
        # which re-verification reads (it drops them when that owner is a blind spot or unknown)
        ("orphan_ledger", 703),
        ("orphan_offload_object", 1),
        ("orphan_offload_object", 1),
    ]
    corrupt = {f["path"]: f for f in got if f["kind"] == "corrupt_metadata"}
    assert corrupt["/managed-ledgers/b/ns/persistent/cur/s"]["component"] == "cursor"
    assert corrupt["/managed-ledgers/c/ns"]["component"] == "managed-ledger"


def test_a_blind_spot_hides_retention_overdue_ledgers_under_it(spark: Any) -> None:
    """A namespace that could not be listed may hold more of a managed ledger's metadata (its
    cursors): its ledgers are not called overdue until it can be read."""
    name = "d/ns/persistent/t"
    rows = {
        "managed_ledgers": [
            ml(name),
            {"managed_ledger": "d/ns", "path": "/managed-ledgers/d/ns", "error": "cannot list"},
        ],
        "ml_ledgers": ledgers(name, {"ledger_id": 720}, {"ledger_id": 721}),
        "bk_ledgers": [bk(720, name), bk(721, name, **YOUNG_OPEN)],
        "namespace_policies": [pol("d/ns", 60, -1)],
    }
    assert [(f["kind"], f["path"]) for f in audit(spark, rows)] == [
        ("corrupt_metadata", "/managed-ledgers/d/ns")
    ]
    rows["managed_ledgers"].pop()
    assert [(f["kind"], f["ledger_id"]) for f in audit(spark, rows)] == [("retention_overdue", 720)]


def test_what_the_admin_api_cannot_show_is_not_decided(spark: Any) -> None:
    """Rows as the admin API source writes them: schema versions without ledger ids, cursors without
    string properties, offloads without completion state. Nothing is guessed from the gaps."""
    a, b = "a/ns/persistent/t", "a/ns/persistent/u"
    bucket = {"component": "delayed-index-bucket", "delayed_cursor": "s"}
    rows = {
        "managed_ledgers": [ml(a), ml(b)],
        "ml_ledgers": ledgers(
            a,
            {"ledger_id": 1, "offload_uuid": "u1"},  # BookKeeper copy gone: complete
            {"ledger_id": 2, "offload_uuid": "u2"},  # BookKeeper copy gone, an object missing
            {"ledger_id": 3, "offload_uuid": "u3"},  # still in BookKeeper, stale objects: incomplete
            {"ledger_id": 4},
        )
        + ledgers(b, {"ledger_id": 20}),
        "cursors": [
            cur(a, "s", 4, cursor_properties_unknown=True),
            cur(b, "s", 20, cursor_properties={}),  # a scan that saw no bucket property
        ],
        "schema_ledgers": [schema_ref("a/ns/t", None)],
        "bk_ledgers": [
            bk(3, a),
            bk(4, a),
            bk(20, b),
            bk(10, **bucket, delayed_topic="persistent://a/ns/t"),  # hidden: properties unknown
            bk(11, **bucket, delayed_topic="persistent://a/ns/u"),  # properties seen: an orphan
            bk(12, component="schema", schema_id="a/ns/t"),  # hidden: ledger ids unknown
            bk(13, component="schema", schema_id="a/ns/gone"),  # no such schema: an orphan
        ],
        "namespace_policies": [pol("a/ns", -1, -1)],
        "offload_objects": pair("u1", 1) + pair("u2", 2)[:1] + pair("u3", 3),
    }
    got = sorted((f["kind"], f["ledger_id"], f["object_key"]) for f in audit(spark, rows))
    assert got == [
        ("incomplete_offload", 3, "u3-ledger-3"),
        ("missing_offload_object", 2, "u2-ledger-2-index"),
        ("orphan_ledger", 11, None),
        ("orphan_ledger", 13, None),
    ]


# --------------------------------------------------------------------------------------------------
# A healthy cluster
# --------------------------------------------------------------------------------------------------


def test_healthy_inventory_gives_no_finding(spark: Any) -> None:
    t = "h/ns/persistent/t"
    legacy = "h/ns/persistent/legacy"
    rows = {
        "managed_ledgers": [ml(t), ml(legacy)],
        "ml_ledgers": ledgers(
            t,
            {"ledger_id": 1, **offloaded("u1", offload_bookkeeper_deleted=True)},  # in S3, deleted from BK
            {"ledger_id": 2, **offloaded("u2", NOW - H)},  # in S3, lag not passed
            {"ledger_id": 3, "timestamp_ms": NOW - H},
            {"ledger_id": 4},
        )
        + ledgers(legacy, {"ledger_id": 9}),
        "bk_ledgers": [
            bk(2, t),
            bk(3, t),
            bk(4, t, **YOUNG_OPEN),
            bk(5, t, cursor="sub"),
            bk(6, component="compacted-ledger", compacted_topic="persistent://h/ns/t"),
            bk(7, component="delayed-index-bucket", delayed_topic="persistent://h/ns/t"),
            bk(8, component="schema", schema_id="h/ns/t"),
            bk(9, application=None, component=None),  # pre-2019 ledger, referenced
            bk(10, t, ctime_ms=NOW - H),  # just created, not yet in the ML list
        ],
        "cursors": [
            cur(
                t,
                "sub",
                3,
                cursors_ledger_id=5,
                properties={"CompactedTopicLedger": 6},
                cursor_properties={"#pulsar.internal.delayed.bucket_3_4": "7"},
            ),  # fmt: skip
        ],
        "schema_ledgers": [schema_ref("h/ns/t", 8)],
        "namespace_policies": [pol("h/ns", -1, 1000)],  # keep forever, up to 1000 MB
        "offload_objects": pair("u1", 1) + pair("u2", 2),
    }
    assert audit(spark, rows, offload_bucket="tier") == []


def test_compacted_ledger_newer_than_the_znode_reference_is_not_reported(spark: Any) -> None:
    """While ``__compaction`` has a cursor ledger, the newest compacted ledger may be referenced only
    from that ledger's last entry: only compacted ledgers older than the znode's reference count."""
    name = "k/ns/persistent/t"
    compacted = {"component": "compacted-ledger", "compacted_topic": "persistent://k/ns/t"}
    rows = {
        "managed_ledgers": [ml(name)],
        "ml_ledgers": ledgers(name, {"ledger_id": 10}, {"ledger_id": 11}),
        "cursors": [
            cur(name, "__compaction", 11, cursors_ledger_id=50, properties={"CompactedTopicLedger": 200}),
            cur("k/ns/persistent/u", "__compaction", None, cursors_ledger_id=-1),
        ],
        "bk_ledgers": [
            bk(10, name),
            bk(11, name, state="OPEN", ctime_ms=NOW - H),
            bk(50, name, cursor="__compaction"),
            bk(150, **compacted),  # older than the referenced 200: a leftover, reported
            bk(200, **compacted),  # referenced
            bk(250, **compacted),  # newer: may be the live one, kept in the cursor ledger
            bk(300, component="compacted-ledger", compacted_topic="persistent://k/ns/u"),  # no cursor ledger
        ],
        "namespace_policies": [pol("k/ns", -1, -1)],
    }
    got = audit(spark, rows, objects=False)
    assert sorted((f["kind"], f["ledger_id"]) for f in got) == [
        ("orphan_ledger", 150),
        ("orphan_ledger", 300),
    ]


def test_compacted_ledger_judged_on_the_cursor_ledger_entry_read_from_bookies(spark: Any) -> None:
    """With ``cursor_positions`` (the cursor ledger's last entry), the live reference decides: older
    compacted ledgers are stale (even newer than the znode's reference, which the old rule skipped),
    newer ones are a compaction in flight. An unreadable entry falls back to the znode's reference."""
    rows: dict[str, list[dict[str, Any]]] = {"managed_ledgers": [], "ml_ledgers": [], "cursors": [],
                                             "bk_ledgers": [], "cursor_positions": [],
                                             "namespace_policies": [pol("k/ns", -1, -1)]}  # fmt: skip
    for t, base, read in (("t", 0, True), ("u", 1000, False)):
        name = f"k/ns/persistent/{t}"
        rows["managed_ledgers"].append(ml(name))
        rows["ml_ledgers"] += ledgers(name, {"ledger_id": base + 10}, {"ledger_id": base + 11})
        ref = {"CompactedTopicLedger": base + 200}  # the znode's (older) reference
        rows["cursors"].append(
            cur(name, "__compaction", base + 11, cursors_ledger_id=base + 50, properties=ref)
        )
        topic = {"component": "compacted-ledger", "compacted_topic": f"persistent://k/ns/{t}"}
        rows["bk_ledgers"] += [
            bk(base + 10, name),
            bk(base + 11, name, state="OPEN", ctime_ms=NOW - H),
            bk(base + 50, name, cursor="__compaction"),
            bk(base + 150, **topic),  # older than every reference: stale either way
            # t: the znode's 200 was replaced by the live 260 and deleted (not missing: the znode lags)
            *([bk(base + 200, **topic)] if not read else []),
            bk(base + 250, **topic),  # newer than the znode's reference, older than the live one: stale
            bk(base + 260, **topic),  # the live one (the cursor ledger's last entry)
            bk(base + 280, **topic),  # newer than the live one: a compaction in flight
        ]
        position: dict[str, Any] = {"managed_ledger": name, "tenant": "k", "namespace": "k/ns"}
        position.update(cursor="__compaction", path=f"/managed-ledgers/{name}/__compaction")
        position["cursors_ledger_id"] = base + 50
        if read:
            position.update(ledger_state="OPEN", entry_id=3, compacted_ledger_id=base + 260)
        else:
            position.update(error_kind="unavailable", error="bookie b:3181: no answer within 10s")
        rows["cursor_positions"].append(position)
    got = sorted((f["kind"], f["ledger_id"]) for f in audit(spark, rows, objects=False))
    # u: its entry could not be read, the znode's reference stands in (1250.. not reported)
    assert got == [("orphan_ledger", 150), ("orphan_ledger", 250), ("orphan_ledger", 1150)]
    # the same inventory without the bookie reads: the old rule skips 250; the znode's 200 is gone
    # but BookKeeper holds newer compacted ledgers of t, so the znode lags: not missing
    rows.pop("cursor_positions")
    old = sorted((f["kind"], f["ledger_id"]) for f in audit(spark, rows, objects=False))
    assert old == [("orphan_ledger", 150), ("orphan_ledger", 1150)]
    # no newer compacted ledger of t left: the znode's reference is the live one, and it is lost
    rows["bk_ledgers"] = [r for r in rows["bk_ledgers"] if not 200 < r["ledger_id"] < 1000]
    lost = sorted((f["kind"], f["severity"], f["ledger_id"]) for f in audit(spark, rows, objects=False))
    assert lost == [("missing_ledger", "critical", 200), ("orphan_ledger", "warning", 150),
                    ("orphan_ledger", "warning", 1150)]  # fmt: skip


def test_corrupt_bucket_snapshot_and_cursor_entry(spark: Any) -> None:
    name = "k/ns/persistent/d"
    rows: dict[str, list[dict[str, Any]]] = {
        "managed_ledgers": [ml(name)],
        "ml_ledgers": ledgers(name, {"ledger_id": 10}),
        "cursors": [cur(name, "sub", 10, cursor_properties={"#pulsar.internal.delayed.bucket_10_10": "70"})],
        "bk_ledgers": [
            bk(10, name),
            bk(70, component="delayed-index-bucket", delayed_topic="persistent://k/ns/d"),
        ],
        "bucket_snapshots": [
            {
                "managed_ledger": name,
                "tenant": "k",
                "namespace": "k/ns",
                "cursor": "sub",
                "path": f"/managed-ledgers/{name}/sub",
                "ledger_id": 70,
                "ledger_path": "/ledgers/L0000000070",
                "error_kind": "corrupt",
                "error_entry_id": 2,
                "error": "bookie 127.0.0.1:3181: ledger 70 entry 2: CRC32C digest mismatch",
            },
            {
                "managed_ledger": name,
                "cursor": "sub",
                "ledger_id": 71,
                "error_kind": "unavailable",
                "error": "bookie b: down",
            },
        ],  # fmt: skip
    }
    got = audit(spark, rows, objects=False)
    assert [(f["kind"], f["component"], f["ledger_id"], f["path"]) for f in got] == [
        ("corrupt_metadata", "delayed-index-bucket", 70, "/ledgers/L0000000070")
    ]
    evidence = json.loads(got[0]["evidence"])
    assert evidence["entry_id"] == 2 and "digest mismatch" in evidence["problem"]


def test_old_broker_bucket_snapshot_owner_from_the_key_range(spark: Any) -> None:
    """Snapshot ledgers without topic/cursor metadata (older brokers): the owner is the managed ledger
    listing the first ledger of the bucket key; unknown owners hide behind any blind spot."""
    name = "k/ns/persistent/d"
    old = {"component": "delayed-index-bucket", "delayed_topic": None}
    rows: dict[str, list[dict[str, Any]]] = {
        "managed_ledgers": [ml(name), ml("z/ns/persistent/broken", error="not a ManagedLedgerInfo")],
        "ml_ledgers": ledgers(name, {"ledger_id": 10}, {"ledger_id": 11}),
        "cursors": [cur(name, "sub", 10)],
        "bk_ledgers": [
            bk(10, name),
            bk(11, name, state="OPEN", ctime_ms=NOW - H),
            bk(70, bucket_key="#pulsar.internal.delayed.bucket_10_11", **old),  # owner found: reported
            bk(71, bucket_key="#pulsar.internal.delayed.bucket_5_6", **old),  # trimmed range: owner unknown
        ],
    }
    got = [f for f in audit(spark, rows, objects=False) if f["kind"] == "orphan_ledger"]
    assert [(f["ledger_id"], f["managed_ledger"], f["component"]) for f in got] == [
        (70, name, "delayed-index-bucket")
    ]
    rows["managed_ledgers"].pop()  # no blind spot left: an unknown owner is still not proven ours
    found = audit(spark, rows, objects=False)
    assert sorted(f["ledger_id"] for f in found if f["kind"] == "orphan_ledger") == [70]
    assert [f["ledger_id"] for f in found if f["kind"] == "foreign_ledger"] == [71]
