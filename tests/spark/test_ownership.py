"""Ownership (audit/ownership.py) in the audit rules: foreign tenants, unknown owners, deleted tenants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerlens.audit import run_audit
from ledgerlens.audit.ownership import collect_ownership
from ledgerlens.inventory import schemas
from ledgerlens.settings.config import AuditConfig

pytestmark = [pytest.mark.spark, pytest.mark.unit]

NOW = 1_800_000_000_000
OLD = NOW - 30 * 24 * 3_600_000


def bk(lid: int, **kw: Any) -> dict[str, Any]:
    row = {"ledger_id": lid, "path": f"/ledgers/L{lid:010d}", "state": "CLOSED", "length": 100 + lid,
           "ctime_ms": OLD, "application": "pulsar", "component": "managed-ledger"}  # fmt: skip
    row.update(kw)
    return row


ROWS: dict[str, list[dict[str, Any]]] = {
    "bk_ledgers": [
        bk(1, managed_ledger="own/ns/persistent/gone"),  # our tenant (managed ledgers): orphan
        bk(2, managed_ledger="pol/ns/persistent/gone"),  # our tenant (policies only): orphan
        bk(3, managed_ledger="bare/ns/persistent/gone"),  # our tenant (tenant node only): orphan
        bk(4, component="schema", schema_id="sch/ns/t"),  # our tenant (schemas only): orphan
        bk(5, managed_ledger="other/ns/persistent/t"),  # another cluster's data ledger
        bk(6, managed_ledger="other/ns/persistent/t", cursor="sub"),  # ... its cursor ledger
        bk(7, component="compacted-ledger", compacted_topic="persistent://other/ns/t"),
        bk(8, component="schema", schema_id="other/ns/t"),
        bk(9, managed_ledger="gone/ns/persistent/t"),  # a deleted tenant, declared below
        bk(10, component="something-new"),  # owner unknown: not provably ours
        bk(11, application=None, component=None),  # not Pulsar's: unattributed as before
    ],
    "managed_ledgers": [
        {
            "managed_ledger": "own/ns/persistent/live",
            "path": "/managed-ledgers/own/ns/persistent/live",
            "tenant": "own",
            "namespace": "own/ns",
        }
    ],  # fmt: skip
    "namespace_policies": [{"tenant": "pol", "namespace": "pol/ns", "path": "/admin/policies/pol/ns"}],
    "schema_ledgers": [
        {
            "schema_id": "sch/ns/live",
            "path": "/schemas/sch/ns/live",
            "tenant": "sch",
            "namespace": "sch/ns",
            "version": 0,
            "ledger_id": 99,
            "is_latest": True,
        }
    ],  # fmt: skip
    "pulsar_tenants": [{"tenant": "bare", "path": "/admin/policies/bare", "store": "zk:x"}],
}


def _tables(spark: Any) -> dict[str, Any]:
    out = {}
    for name, schema in schemas.INVENTORY.items():
        if name != "offload_objects":
            out[name] = spark.createDataFrame([schemas.to_row(schema, r) for r in ROWS.get(name, [])], schema)
    return out


def test_foreign_tenants_unknown_owners_and_deleted_tenants(spark: Any) -> None:
    tables = _tables(spark)
    own = collect_ownership(tables, ["gone"])
    assert own.tenants == {"own", "pol", "bare", "sch"}
    assert own.owns("gone") and own.is_foreign("other") and own.is_foreign(None)

    got = [r.asDict() for r in run_audit(tables, AuditConfig(as_of_ms=NOW)).collect()]
    by_id = {r["ledger_id"]: r for r in got if r["ledger_id"] != 99}
    assert {i: r["kind"] for i, r in by_id.items()} == {
        1: "orphan_ledger",
        2: "orphan_ledger",
        3: "orphan_ledger",
        4: "orphan_ledger",
        5: "foreign_ledger",
        6: "foreign_ledger",
        7: "foreign_ledger",
        8: "foreign_ledger",
        9: "foreign_ledger",
        10: "foreign_ledger",
        11: "unattributed_ledger",
    }
    for i in (5, 6, 7, 8, 9, 10):
        assert (by_id[i]["severity"], by_id[i]["action"]) == ("info", "none")
    assert {by_id[i]["tenant"] for i in (5, 6, 7, 8)} == {"other"}
    assert by_id[6]["component"] == "cursor" and by_id[6]["cursor"] == "sub"
    assert by_id[7]["managed_ledger"] == "other/ns/persistent/t"
    assert json.loads(by_id[10]["evidence"])["reason"] == "owner unknown"
    assert by_id[10]["tenant"] is None
    assert json.loads(by_id[5]["evidence"])["tenant"] == "other"
    assert by_id[1]["tenant"] == "own" and by_id[4]["tenant"] == "sch"

    # --deleted-tenant gone: its ledger is an orphan candidate again; nothing else changes
    again = run_audit(tables, AuditConfig(as_of_ms=NOW, deleted_tenants=("gone",))).collect()
    kinds = {r["ledger_id"]: r["kind"] for r in again if r["ledger_id"] != 99}
    assert kinds == {**{i: r["kind"] for i, r in by_id.items()}, 9: "orphan_ledger"}
