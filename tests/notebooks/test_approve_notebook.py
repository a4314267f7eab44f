"""The approval runbook: stored clean, approves headless under papermill, refuses a wrong plan hash,
selects nothing the person did not select, and takes its files from a ``sandbox`` directory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ledgerlens import report
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.plan import build_plan, write_plan

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "notebooks" / "approve_deletions.ipynb"
ML = "ll-app/orders/persistent/gone"


def test_runbook_is_stored_without_outputs() -> None:
    import papermill as pm

    nb = nbformat.read(str(RUNBOOK), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert len([c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]) == 1
    params = pm.inspect_notebook(str(RUNBOOK))
    for name in (
        "sandbox", "plan_path", "journal_path", "plan_hash", "approver", "reason", "approve_now", "item_ids"
    ):  # fmt: skip
        assert params[name]["help"], name
    assert params["sandbox"]["default"] == params["plan_path"]["default"] == '""'  # the sandbox fills them


def _plan(tmp: Path) -> Path:
    """A plan of two orphan ledgers from a minimal audit output."""
    out = tmp / "audit"
    (out / "findings.parquet").mkdir(parents=True)
    rows = [
        {
            "kind": "orphan_ledger",
            "severity": "warning",
            "component": "managed-ledger",
            "ledger_id": lid,
            "managed_ledger": ML,
            "bytes": 100 * lid,
            "evidence": "{}",
            "action": "delete_ledger",
            "tenant": "ll-app",
            "namespace": "ll-app/orders",
            "age_seconds": 90000,
        }
        for lid in (11, 12)
    ]
    pq.write_table(pa.Table.from_pylist(rows), out / "findings.parquet" / "part-0.parquet")
    (out / "summary.json").write_text(json.dumps({"as_of_ms": int(time.time() * 1000), "auditor": "alice"}))
    custom = [("application", "pulsar"), ("component", "managed-ledger"), ("pulsar/managed-ledger", ML)]
    bk = [
        {
            "ledger_id": lid,
            "path": f"/ledgers/00/0000/L00{lid}",
            "znode_version": 0,
            "custom_metadata": custom,
            "ctime_ms": 1,
            "length": 100 * lid,
            "state": "CLOSED",
            "error": None,
        }
        for lid in (11, 12)
    ]
    schema = pa.schema(
        [
            ("ledger_id", pa.int64()),
            ("path", pa.string()),
            ("znode_version", pa.int32()),
            ("custom_metadata", pa.map_(pa.string(), pa.string())),
            ("ctime_ms", pa.int64()),
            ("length", pa.int64()),
            ("state", pa.string()),
            ("error", pa.string()),
        ]
    )
    for table, data in (
        ("bk_ledgers", pa.Table.from_pylist(bk, schema=schema)),
        ("namespace_policies", pa.Table.from_pylist([{"tenant": "ll-app"}])),
    ):
        (out / "inventory" / table).mkdir(parents=True)
        pq.write_table(data, out / "inventory" / table / "part-0.parquet")
    return write_plan(build_plan(out), tmp / "plan.json")


def test_headless_approval_and_refusal(tmp_path: Path) -> None:
    plan_path = _plan(tmp_path)
    plan = json.loads(plan_path.read_text())
    journal = tmp_path / "journal.jsonl"
    params = {
        "plan_path": str(plan_path),
        "journal_path": str(journal),
        "approve_now": True,
        "approver": "carol",
        "reason": "INC-42 orphans",
        "interactive": False,
    }
    with pytest.raises(report.ReportError, match="plan hash mismatch"):
        report.execute_runbook(RUNBOOK, tmp_path / "refused.ipynb", {**params, "plan_hash": "0" * 64})
    assert not journal.exists()
    with pytest.raises(report.ReportError, match="approver is empty"):
        report.execute_runbook(
            RUNBOOK, tmp_path / "nobody.ipynb", {**params, "plan_hash": plan["plan_hash"], "approver": ""}
        )

    out = report.execute_runbook(
        RUNBOOK,
        tmp_path / "approved.ipynb",
        {**params, "plan_hash": plan["plan_hash"], "item_ids": "ledger:12"},
    )
    approval = report.read_recorded(out, "approval")
    assert approval["items"] == ["ledger:12"] and approval["approver"] == "carol"
    assert report.read_recorded(out, "journal") == {"approvals": 1, "refused": 0, "dead_lettered": 0}
    assert Journal(journal).verify() == 1
    assert json.loads((tmp_path / "approval.json").read_text())["plan_hash"] == plan["plan_hash"]
    html = report.to_html(out, tmp_path / "approval.html").read_text()
    assert "INC-42 orphans" in html and plan["plan_hash"] in html


def test_nothing_is_selected_until_the_person_selects(tmp_path: Path) -> None:
    plan_path = _plan(tmp_path)
    plan = json.loads(plan_path.read_text())
    journal = tmp_path / "journal.jsonl"
    params = {"plan_path": str(plan_path), "journal_path": str(journal), "interactive": False}
    shown = report.execute_runbook(RUNBOOK, tmp_path / "shown.ipynb", params)
    totals = [t for t in _html_outputs(shown) if "selected" in t]
    assert len(totals) == 1 and "<b>0</b> of 2 shown / 2 items selected (nothing)" in totals[0]
    # approving without a selection approves nothing: refused, the journal untouched
    approve = {
        **params,
        "approve_now": True,
        "plan_hash": plan["plan_hash"],
        "approver": "carol",
        "reason": "x",
    }
    with pytest.raises(report.ReportError, match="the selection is empty"):
        report.execute_runbook(RUNBOOK, tmp_path / "none.ipynb", approve)
    assert not journal.exists()
    with pytest.raises(report.ReportError, match="cannot select 'ledger:99': not in the plan"):
        report.execute_runbook(RUNBOOK, tmp_path / "unknown.ipynb", {**approve, "item_ids": "ledger:99"})
    assert not journal.exists()


def test_sandbox_fills_plan_and_journal(tmp_path: Path) -> None:
    """``sandbox DIR``: the plan is DIR/plan.json, the journal DIR/deletion-journal.jsonl, as the
    other runbooks' ``sandbox`` fills their addresses; ``item_ids=all`` selects every item shown."""
    sandbox = tmp_path / "sb"
    sandbox.mkdir()
    (sandbox / "state.json").write_text(json.dumps({"zk_hosts": "127.0.0.1:1", "bucket": "b"}))
    plan_path = _plan(tmp_path)
    plan_path.rename(sandbox / "plan.json")
    plan = json.loads((sandbox / "plan.json").read_text())
    out = report.execute_runbook(
        RUNBOOK,
        tmp_path / "approved.ipynb",
        {
            "sandbox": str(sandbox),
            "approve_now": True,
            "plan_hash": plan["plan_hash"],
            "approver": "carol",
            "reason": "INC-7 sandbox orphans",
            "item_ids": "all",
            "interactive": False,
        },
        cwd=tmp_path,
    )
    assert report.read_recorded(out, "approval")["items"] == ["ledger:11", "ledger:12"]
    assert Journal(sandbox / "deletion-journal.jsonl").verify() == 1
    assert json.loads((sandbox / "approval.json").read_text())["plan_hash"] == plan["plan_hash"]
    assert not (tmp_path / "deletion-journal.jsonl").exists()  # not the working directory's
    with pytest.raises(report.ReportError, match="is it up"):
        report.execute_runbook(RUNBOOK, tmp_path / "gone.ipynb", {"sandbox": str(tmp_path / "gone")})


def test_widget_selects_only_what_it_is_given(tmp_path: Path) -> None:
    from ledgerlens.deletion.approval import ApprovalRefused
    from ledgerlens.deletion.plan import read_plan
    from ledgerlens_widgets import ApprovalWidget

    plan = read_plan(_plan(tmp_path))
    assert ApprovalWidget(plan, tmp_path / "j.jsonl").value == []
    assert ApprovalWidget(plan, tmp_path / "j.jsonl", selected=["ledger:12"]).value == ["ledger:12"]
    with pytest.raises(ApprovalRefused, match="hidden by the filters"):
        ApprovalWidget(plan, tmp_path / "j.jsonl", min_bytes=1200, selected=["ledger:11"])


def _html_outputs(notebook: Path) -> list[str]:
    nb = nbformat.read(str(notebook), as_version=4)
    return [
        o["data"]["text/html"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
