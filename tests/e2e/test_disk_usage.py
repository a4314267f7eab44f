"""Where the bookies' disk goes, on the real Pulsar sandbox (``audit.disk`` in the audit pipeline).

The audit runs on the session's sandbox (seeded traffic, planted failures). Its ``disk_usage.parquet``
and ``summary.json``'s ``disk_usage`` must add up to the sum of the ``bk_ledgers`` lengths the audit
scanned, and each state's bytes must be the lengths of the ledgers that the findings (orphan ==
the ``orphan_ledger`` findings' ledgers, ...) and the inventory (open ledgers, managed ledgers' lists
and their cursors) put there, recomputed here ledger by ledger from the published files.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ledgerlens.audit.disk import COLUMNS, FINDING_STATES, STATES
from ledgerlens.report.disk import disk_figure, disk_states_html, disk_table_html
from ledgerlens.report.metrics import render
from ledgerlens.report.text import human_bytes
from ledgerlens.runtime.console import disk_line
from ledgerlens_sandbox.failures import audit_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]


def _rows(path: str) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


def _expected_states(tables: dict[str, str], findings: pd.DataFrame) -> dict[int, str]:
    """Every scanned ledger's state, by the documented priority, in plain Python."""
    prio = {s: i for i, s in enumerate(STATES)}
    decided: dict[int, str] = {}

    def decide(lid: int, state: str) -> None:
        if lid not in decided or prio[state] < prio[decided[lid]]:
            decided[lid] = state

    mll = _rows(tables["ml_ledgers"])
    for f in findings.to_dict("records"):
        if f["kind"] in FINDING_STATES and pd.notna(f["ledger_id"]):
            decide(int(f["ledger_id"]), FINDING_STATES[f["kind"]])
        elif f["kind"] == "inactive_cursor":
            ev = json.loads(f["evidence"])
            for r in mll:
                if (
                    r["managed_ledger"] == f["managed_ledger"]
                    and ev["first_held_ledger_id"] <= r["ledger_id"] <= ev["last_held_ledger_id"]
                    and not r["is_last"]
                ):
                    decide(r["ledger_id"], "inactive_cursor")
    slowest: dict[str, int] = {}
    unknown: set[str] = set()
    for c in _rows(tables["cursors"]):
        if c["managed_ledger"] is None:
            continue
        if c["error"] is not None or c["mark_delete_ledger_id"] is None:
            unknown.add(c["managed_ledger"])
        else:
            old = slowest.get(c["managed_ledger"], c["mark_delete_ledger_id"])
            slowest[c["managed_ledger"]] = min(old, c["mark_delete_ledger_id"])
    by_ml: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in mll:
        by_ml[r["managed_ledger"]].append(r)
    consumed: dict[int, bool] = {}
    for name, rows in by_ml.items():
        last = [r["ledger_id"] for r in rows if r["is_last"]]
        last_id = max(last) if last else max(r["ledger_id"] for r in rows)
        bound = slowest.get(name, last_id)
        for r in rows:
            done = not r["is_last"] and name not in unknown and r["ledger_id"] < bound
            consumed[r["ledger_id"]] = consumed.get(r["ledger_id"], True) and done
    out = {}
    for b in _rows(tables["bk_ledgers"]):
        lid = b["ledger_id"]
        if lid in decided:
            out[lid] = decided[lid]
        elif b["state"] in ("OPEN", "IN_RECOVERY"):
            out[lid] = "open"
        elif lid in consumed:
            out[lid] = "consumed_in_retention" if consumed[lid] else "live_unconsumed"
        else:
            out[lid] = "other"
    return out


def test_disk_breakdown_adds_up_on_the_real_sandbox(pulsar_env: Any, spark: Any, tmp_path: Path) -> None:
    from ledgerlens.audit import pipeline
    from ledgerlens.settings.config import S3Source, ZooKeeperSource

    state = pulsar_env.state
    run = pipeline.run(
        spark,
        ZooKeeperSource(hosts=state["zookeeper_hosts"]),
        S3Source(bucket=state["bucket"], endpoint_url=state["s3_endpoint"], region=state["region"]),
        audit_config(),
        tmp_path / "audit",
        progress=False,
    )
    usage = run.summary["disk_usage"]
    print(f"disk_usage {usage}; timings {run.summary['timings']}")
    df = pd.read_parquet(Path(run.out_dir) / "disk_usage.parquet")
    assert tuple(df.columns) == COLUMNS

    bk = {b["ledger_id"]: b for b in _rows(run.inventory_tables["bk_ledgers"])}
    total = sum(b["length"] or 0 for b in bk.values())
    assert len(bk) > 20 and total > 0, "the sandbox wrote ledgers"
    assert usage["total_bytes"] == int(df["bytes"].sum()) == total
    assert int(df["ledgers"].sum()) == len(bk)
    by_state = df.groupby("state")["bytes"].sum()
    assert usage["by_state"] == {s: int(by_state[s]) for s in STATES if s in by_state.index}

    findings = run.findings_pandas()

    def length_of(ids: set[int]) -> int:
        return sum(bk[i]["length"] or 0 for i in ids if i in bk)

    def ids_of(kind: str) -> set[int]:
        return {int(i) for i in findings.loc[findings["kind"] == kind, "ledger_id"].dropna()}

    # the findings decide: each planted kind's ledgers are exactly that state's bytes
    assert ids_of("orphan_ledger"), "the sandbox plants orphan ledgers"
    for kind in ("orphan_ledger", "foreign_ledger", "unattributed_ledger", "offloaded_not_deleted"):
        assert int(by_state.get(FINDING_STATES[kind], 0)) == length_of(ids_of(kind)), kind
    overdue = ids_of("retention_overdue") - ids_of("offloaded_not_deleted")
    assert int(by_state.get("retention_overdue", 0)) == length_of(overdue)
    # the inventory decides the rest: every ledger's state, recomputed here from the published files
    expected = _expected_states(run.inventory_tables, findings)
    for s in STATES:
        assert int(by_state.get(s, 0)) == length_of({i for i, e in expected.items() if e == s}), s
    counts = df.groupby("state")["ledgers"].sum()
    assert {s: int(n) for s, n in counts.items()} == dict(pd.Series(expected).value_counts())
    assert "live_unconsumed" in by_state.index and "other" in by_state.index  # data, cursors, schemas

    # every view shows the same total
    line = disk_line(run.summary)
    assert line is not None and line.startswith(f"disk: {human_bytes(total)} in BookKeeper")
    assert f'<th>total</th><th class="ll-num">{len(bk):,}</th>' in disk_table_html(df)
    assert human_bytes(total) in disk_states_html(df)
    fig = disk_figure(df)
    assert sum(sum(t.x) for t in fig.data) == total
    metrics = render(run.summary, cluster="sandbox", success=True, last_success_s=0.0)
    gauges = [ln for ln in metrics.splitlines() if ln.startswith("ledgerlens_bookkeeper_bytes{")]
    assert sum(int(ln.rsplit(" ", 1)[1]) for ln in gauges) == total
