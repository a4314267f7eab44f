"""Deletion plan, journal, approval and messages: the rules that keep live data out of a deletion."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ledgerlens.deletion import messages as m
from ledgerlens.deletion.approval import ApprovalRefused, approvals_in, approve
from ledgerlens.deletion.journal import Journal, JournalTampered
from ledgerlens.deletion.plan import PlanError, build_plan, parse_filter, plan_hash, read_plan, write_plan
from ledgerlens.errors import ConfigError
from ledgerlens.inventory.schemas import FINDINGS, columns

pytestmark = pytest.mark.unit

NOW = 1_800_000_000_000
UUID = "3f2b6c1e-8d4a-4f8e-9a1b-0c2d3e4f5a6b"
ML = "ll-app/orders/persistent/gone"


def _finding(kind: str, **kw: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(columns(FINDINGS))
    row.update(kind=kind, severity="warning", evidence="{}", action="delete_ledger", age_seconds=90000)
    row.update(kw)
    return row


def _custom(ml: str) -> list[tuple[str, str]]:
    return [("application", "pulsar"), ("component", "managed-ledger"), ("pulsar/managed-ledger", ml)]


def write_audit(
    out: Path,
    findings: list[dict[str, Any]],
    *,
    tenants: tuple[str, ...] = ("ll-app",),
    as_of_ms: int = NOW - 60_000,
) -> Path:
    """A minimal audit --out directory as the pipeline writes it (Parquet tables, summary.json)."""
    (out / "findings.parquet").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(findings), out / "findings.parquet" / "part-0.parquet")
    (out / "summary.json").write_text(json.dumps({"as_of_ms": as_of_ms, "auditor": "alice"}))
    inv = out / "inventory"
    bk = [
        {"ledger_id": i, "path": f"/ledgers/00/0000/L{i:04d}", "znode_version": 0, "custom_metadata": c,
         "ctime_ms": NOW - 10**8, "length": 1000 + i, "state": "CLOSED", "error": None}
        for i, c in ((11, _custom(ML)), (12, _custom(ML)), (13, _custom("other/ns/persistent/t")),
                     (14, _custom(ML)), (15, []))
    ]  # fmt: skip
    mtype = pa.map_(pa.string(), pa.string())
    schema = pa.schema(
        [("ledger_id", pa.int64()), ("path", pa.string()), ("znode_version", pa.int32()),
         ("custom_metadata", mtype), ("ctime_ms", pa.int64()), ("length", pa.int64()),
         ("state", pa.string()), ("error", pa.string())]
    )  # fmt: skip
    (inv / "bk_ledgers").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(bk, schema=schema), inv / "bk_ledgers" / "part-0.parquet")
    objs = [
        {"bucket": "b", "key": f"{UUID}-ledger-21", "size": 5000, "etag": '"e1"', "role": "data"},
        {"bucket": "b", "key": f"{UUID}-ledger-21-index", "size": 300, "etag": '"e2"', "role": "index"},
    ]
    (inv / "offload_objects").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(objs), inv / "offload_objects" / "part-0.parquet")
    (inv / "namespace_policies").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([{"tenant": t, "namespace": f"{t}/ns"} for t in tenants]),
        inv / "namespace_policies" / "part-0.parquet",
    )
    return out


def _ml_ledger(lid: int, **kw: Any) -> dict[str, Any]:
    row = dict(
        component="managed-ledger",
        ledger_id=lid,
        managed_ledger=ML,
        tenant="ll-app",
        namespace="ll-app/orders",
    )
    row.update(kw)
    kind = str(row.pop("kind", "orphan_ledger"))
    return _finding(kind, **row)


def standard_findings() -> list[dict[str, Any]]:
    obj = dict(kind="orphan_offload_object", component="offload", action="delete_object", managed_ledger=ML,
               tenant="ll-app", namespace="ll-app/orders", ledger_id=21)  # fmt: skip
    return [
        _ml_ledger(11, bytes=1011),
        _ml_ledger(12, bytes=1012, age_seconds=10),
        # another cluster's ledger in a shared BookKeeper: its tenant is not in the audited store
        _ml_ledger(13, managed_ledger="other/ns/persistent/t", tenant="other", namespace="other/ns"),
        # an orphan that a rule turned into a question (emptied managed-ledger node)
        _ml_ledger(14, action="investigate"),
        _finding("unattributed_ledger", severity="info", ledger_id=15, action="none"),
        _finding("foreign_ledger", ledger_id=13, action="none", severity="info"),
        _finding(
            "missing_ledger", severity="critical", ledger_id=16, action="investigate", managed_ledger=ML
        ),
        _ml_ledger(12, severity="critical"),
        {**_finding("orphan_offload_object", object_key=f"{UUID}-ledger-21", bytes=5000), **obj},
        {**_finding("orphan_offload_object", object_key=f"{UUID}-ledger-21-index", bytes=300), **obj},
        _ml_ledger(30, kind="retention_overdue", action="load_topic", path=f"/managed-ledgers/{ML}"),
    ]


@pytest.fixture
def audit_dir(tmp_path: Path) -> Path:
    return write_audit(tmp_path / "audit", standard_findings())


def test_plan_keeps_only_safe_items(audit_dir: Path) -> None:
    plan = build_plan(audit_dir, now_ms=NOW, planned_by="bob")
    ids = [i["item_id"] for i in plan["items"]]
    assert ids == ["ledger:11", "ledger:12", f"offload:{UUID}:21"]
    reasons = {(r["kind"], r["ledger_id"]): r["reason"] for r in plan["refused"]}
    assert "not in the audited Pulsar store" in reasons[("orphan_ledger", 13)]
    assert "investigate" in reasons[("orphan_ledger", 14)]
    assert reasons[("orphan_ledger", 12)] == "critical finding"
    assert not any(
        r["kind"] in ("unattributed_ledger", "foreign_ledger", "missing_ledger") for r in plan["refused"]
    )
    led = plan["items"][0]
    assert led["expected"]["znode_version"] == 0
    assert led["expected"]["custom_metadata"]["pulsar/managed-ledger"] == ML
    obj = plan["items"][2]
    assert [o["key"] for o in obj["expected"]["objects"]] == [f"{UUID}-ledger-21", f"{UUID}-ledger-21-index"]
    assert obj["expected"]["objects"][0]["etag"] == '"e1"' and obj["bytes"] == 5300
    assert plan["totals"] == {"items": 3, "bytes": 1011 + 1012 + 5300, "delete_ledger": 2, "delete_object": 1,
                              "load_topic": 0, "delete_remote_segment": 0}  # fmt: skip
    assert plan["as_of_ms"] == NOW - 60_000 and plan["created_ms"] == NOW and plan["auditor"] == "alice"


def test_plan_hash_is_deterministic_and_binds_content(audit_dir: Path, tmp_path: Path) -> None:
    a = build_plan(audit_dir, now_ms=NOW, planned_by="bob")
    b = build_plan(audit_dir, now_ms=NOW, planned_by="bob")
    assert a == b and len(a["plan_hash"]) == 64 and a["plan_hash"] == plan_hash(a)
    path = write_plan(a, tmp_path / "plan.json")
    assert read_plan(path) == a
    edited = json.loads(path.read_text())
    edited["items"][0]["expected"]["ledger_id"] = 999
    path.write_text(json.dumps(edited))
    with pytest.raises(PlanError, match="changed after planning"):
        read_plan(path)


def test_an_audit_suspecting_a_wrong_root_is_never_planned(audit_dir: Path) -> None:
    summary = json.loads((audit_dir / "summary.json").read_text())
    summary["suspected_wrong_root"] = {"message": "40 of 50 referenced ledgers (80%) are missing"}
    (audit_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(PlanError, match=r"suspects a wrong --ledgers-root or chroot \(40 of 50"):
        build_plan(audit_dir, now_ms=NOW)


@pytest.mark.parametrize(
    "kind", ["unattributed_ledger", "foreign_ledger", "foreign_offload_object", "missing_ledger"]
)
def test_never_plannable_kinds_are_refused(audit_dir: Path, kind: str) -> None:
    with pytest.raises(PlanError, match=kind):
        build_plan(audit_dir, kinds=["orphan_ledger", kind], now_ms=NOW)


def test_load_topic_items_and_filters(audit_dir: Path) -> None:
    plan = build_plan(audit_dir, kinds=["retention_overdue"], now_ms=NOW)
    assert [i["item_id"] for i in plan["items"]] == [f"topic:{ML}"]
    assert plan["items"][0]["expected"]["topic"] == "persistent://ll-app/orders/gone"
    old = build_plan(audit_dir, filters=["age>=1d"], now_ms=NOW)
    assert [i["item_id"] for i in old["items"]] == ["ledger:11", f"offload:{UUID}:21"]
    only = build_plan(audit_dir, filters=["kind=orphan_ledger", "ledger_id<=11"], now_ms=NOW)
    assert [i["item_id"] for i in only["items"]] == ["ledger:11"]
    assert parse_filter("bytes>=2GiB").value == 2 << 30
    with pytest.raises(ConfigError):
        parse_filter("colour=red")


def test_journal_chain_detects_edit_truncation_and_reorder(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    j.append([{"type": "a", "n": 1}, {"type": "b", "n": 2}])
    j.append([{"type": "c", "n": 3}])
    assert j.verify() == 3
    assert [r["n"] for r in Journal(j.path).records()] == [1, 2, 3]
    good = j.path.read_bytes()
    lines = good.splitlines(keepends=True)

    j.path.write_bytes(good.replace(b'"n":2', b'"n":5'))
    with pytest.raises(JournalTampered, match="line 2 does not chain"):
        Journal(j.path).verify()
    j.path.write_bytes(b"".join(lines[:2]))
    with pytest.raises(JournalTampered, match="truncated"):
        Journal(j.path).verify()
    j.path.write_bytes(lines[1] + lines[0] + lines[2])
    with pytest.raises(JournalTampered):
        Journal(j.path).verify()
    j.path.write_bytes(good[:-5])
    with pytest.raises(JournalTampered, match="cut short"):
        Journal(j.path).verify()
    j.path.write_bytes(good)
    Journal(j.path).append([{"type": "d"}])
    assert Journal(j.path).verify() == 4
    # a tampered journal is never extended
    j.path.write_bytes(j.path.read_bytes().replace(b'"n":1', b'"n":7'))
    with pytest.raises(JournalTampered):
        Journal(j.path).append([{"type": "e"}])


def _plan(audit_dir: Path, tmp_path: Path) -> tuple[dict[str, Any], Path]:
    plan = build_plan(audit_dir, now_ms=NOW, planned_by="bob")
    return plan, write_plan(plan, tmp_path / "plan.json")


def test_approval_rules(audit_dir: Path, tmp_path: Path) -> None:
    plan, path = _plan(audit_dir, tmp_path)
    j = Journal(tmp_path / "journal.jsonl")
    ok = dict(plan_hash_given=plan["plan_hash"], approver="carol", reason="orphans of INC-42", now=NOW + 1000)
    with pytest.raises(ApprovalRefused, match="plan hash mismatch"):
        approve(path, j, **{**ok, "plan_hash_given": "0" * 64})
    with pytest.raises(ApprovalRefused, match="older than the limit"):
        approve(path, j, **{**ok, "now": NOW + 25 * 3600 * 1000})
    with pytest.raises(ApprovalRefused, match="approver is empty"):
        approve(path, j, **{**ok, "approver": "  "})
    with pytest.raises(ApprovalRefused, match="reason is empty"):
        approve(path, j, **{**ok, "reason": ""})
    with pytest.raises(ApprovalRefused, match="also the plan's auditor"):
        approve(path, j, **{**ok, "approver": "alice"}, forbid_self_approval=True)
    with pytest.raises(ApprovalRefused, match="not in the plan"):
        approve(path, j, **ok, item_ids=["ledger:999"])
    assert not j.path.exists()  # nothing refused reached the journal
    approve(path, j, **{**ok, "approver": "alice"}, forbid_self_approval=False)  # allowed unless configured
    a = approve(path, j, **ok, item_ids=["ledger:11"], out=tmp_path / "approval.json")
    assert [i["item_id"] for i in a["items"]] == ["ledger:11"] and a["journal_seq"] == 1
    recorded = approvals_in(j.records())
    assert len(recorded) == 2 and a["approval_id"] in recorded
    assert recorded[a["approval_id"]]["approver"] == "carol"
    assert json.loads((tmp_path / "approval.json").read_text())["journal_line_hash"]


def test_messages_bind_to_the_approved_item(audit_dir: Path) -> None:
    plan = build_plan(audit_dir, now_ms=NOW)
    led, obj = plan["items"][0], plan["items"][2]
    msg = m.item_to_message(led, plan["plan_hash"])
    back = m.decode(msg.SerializeToString())
    assert back == msg and back.ledgerId == 11 and back.ledgerType == m.pb.LEDGER
    assert back.managedLedgerName == ML and back.topicName == "persistent://ll-app/orders/gone"
    forged = m.decode(msg.SerializeToString())
    forged.ledgerId = 12
    assert forged != m.item_to_message(led, plan["plan_hash"])
    om = m.item_to_message(obj, plan["plan_hash"])
    assert om.ledgerType == m.pb.OFFLOAD_LEDGER and om.objectKey == f"{UUID}-ledger-21" and om.ledgerId == 21
    with pytest.raises(Exception, match="PendingDeleteLedgerInfo|lacks"):
        m.decode(b"\xff\xff not a message")


def test_cli_plan_and_approve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    from ledgerlens import cli

    audit_dir = write_audit(
        tmp_path / "audit", standard_findings(), as_of_ms=int(time.time() * 1000) - 60_000
    )
    plan_path = tmp_path / "plan.json"
    assert (
        cli.main(["plan", "--findings", str(audit_dir), "--out", str(plan_path), "--kinds", "orphan_ledger"])
        == 0
    )
    plan = read_plan(plan_path)
    out = capsys.readouterr().out
    assert plan["plan_hash"] in out and "2 items" in out
    assert (
        cli.main(
            ["plan", "--findings", str(audit_dir), "--out", str(plan_path), "--kinds", "unattributed_ledger"]
        )
        == 2
    )
    assert "never a deletion candidate" in capsys.readouterr().err
    journal = tmp_path / "j.jsonl"
    base = ["approve", "--plan", str(plan_path), "--journal", str(journal), "--out", str(tmp_path / "a.json"),
            "--approver", "carol", "--reason", "INC-42"]  # fmt: skip
    assert cli.main([*base, "--plan-hash", "f" * 64]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ledgerlens approve: error: plan hash mismatch") and err.count("\n") == 1
    assert not journal.exists()
    assert cli.main([*base, "--plan-hash", plan["plan_hash"], "--items", "ledger:11"]) == 0
    assert "approved 1 items" in capsys.readouterr().out
    assert Journal(journal).verify() == 1


def test_approval_widget_headless(tmp_path: Path) -> None:
    import time

    from ledgerlens_widgets import ApprovalWidget

    audit_dir = write_audit(
        tmp_path / "audit", standard_findings(), as_of_ms=int(time.time() * 1000) - 60_000
    )
    plan = build_plan(audit_dir, kinds=["orphan_ledger", "orphan_offload_object", "retention_overdue"])
    j = tmp_path / "journal.jsonl"
    wdg = ApprovalWidget(plan, j, approver="carol", reason="INC-42")
    assert len(wdg.shown()) == 4 and wdg.value == []
    wdg.kinds.value = ("orphan_ledger",)
    assert [i["item_id"] for i in wdg.shown()] == ["ledger:11", "ledger:12"]
    wdg.min_age_days.value = 1.0
    wdg.select_shown()
    assert (
        wdg.value == ["ledger:11"] and "1011 B" in wdg.totals.value and plan["plan_hash"] in wdg.totals.value
    )
    wdg.kinds.value = ()
    wdg.min_age_days.value = 0.0
    wdg.tenant.value = "ll-app/orders"
    assert wdg.value == ["ledger:11"]  # the selection survives a filter change that still shows it
    wdg.min_bytes.value = 2000
    assert wdg.value == [] and [i["action"] for i in wdg.shown()] == ["delete_object"]
    wdg.min_bytes.value = 0
    wdg.select_shown()
    # refusals are shown, not raised; nothing reaches the journal
    wdg.hash_confirm.value = "not the hash"
    assert wdg.approve() is None and "plan hash mismatch" in (wdg.error or "")
    assert "Refused" in wdg.result.value and not j.exists()
    wdg.hash_confirm.value = plan["plan_hash"]
    wdg.approve_button.click()
    assert wdg.approval is not None and wdg.error is None, wdg.error
    assert len(wdg.approval["items"]) == 4 and Journal(j).verify() == 1
