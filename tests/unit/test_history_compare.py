"""What changed since the last run (``ledgerlens.audit.history``): first_seen / new, resolved
findings, finding the previous run, the history/ directory, and what the CLI, the summary line and
the metrics make of it. Real files, no Spark."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.audit import history as h
from ledgerlens.errors import ConfigError
from ledgerlens.inventory import schemas
from ledgerlens.runtime.outdir import OutputDir

pytestmark = pytest.mark.unit

DAY_MS = 86_400_000
T1 = 1_795_000_000_000  # 2026-11-18 ...
T2 = T1 + DAY_MS
T3 = T2 + DAY_MS
ARROW = to_arrow_schema(schemas.FINDINGS)


def finding(kind: str, severity: str, **cols: Any) -> dict[str, Any]:
    row = dict.fromkeys(schemas.columns(schemas.FINDINGS))
    row.update(kind=kind, severity=severity, **cols)
    return row


ORPHAN = finding(
    "orphan_ledger", "warning", component="managed-ledger", ledger_id=11, path="/ledgers/L11", bytes=300
)
MISSING = finding(
    "missing_ledger", "critical", component="managed-ledger", ledger_id=12, managed_ledger="t/n/p/a"
)
CURSOR = finding("inactive_cursor", "info", component="cursor", managed_ledger="t/n/p/a", cursor="")
NO_CURSOR = finding("inactive_cursor", "info", component="cursor", managed_ledger="t/n/p/a", cursor=None)


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARROW)


def publish(
    out: Path, rows: list[dict[str, Any]], as_of: int, previous: h.Previous | None, **summary: Any
) -> h.Comparison:
    """What the pipeline's write phase does, into ``out`` directly."""
    comparison = h.Comparison(previous, as_of)
    annotated = comparison.annotate(table(rows))
    (out / "findings.parquet").mkdir(parents=True, exist_ok=True)
    pq.write_table(annotated, out / "findings.parquet" / "part-00000.zstd.parquet")
    h.write_resolved(out, comparison)
    full = {
        "as_of_ms": as_of,
        "cluster_name": "east",
        "total_findings": len(rows),
        **comparison.summary(),
        **summary,
    }
    (out / "summary.json").write_text(json.dumps(full))
    h.record(out, full, comparison, h.DEFAULT_KEEP)
    return comparison


def published(out: Path) -> list[dict[str, Any]]:
    return pq.read_table(out / "findings.parquet").to_pylist()


def by_kind(rows: list[dict[str, Any]]) -> dict[tuple[str, Any], dict[str, Any]]:
    return {(r["kind"], r["ledger_id"] if r["ledger_id"] is not None else r["cursor"]): r for r in rows}


def test_a_first_run_reports_everything_new_and_nothing_resolved(tmp_path: Path) -> None:
    c = publish(tmp_path, [ORPHAN, MISSING, CURSOR], T1, None)
    rows = published(tmp_path)
    assert [(r["new"], r["first_seen"]) for r in rows] == [(True, T1)] * 3
    assert pq.read_table(tmp_path / "findings.parquet").schema.names == schemas.columns(
        schemas.FINDINGS_PUBLISHED
    )
    assert c.summary() == {
        "previous": None,
        "new_by_severity": {"critical": 1, "warning": 1, "info": 1},
        "new_total": 3,
        "resolved_by_severity": {"critical": 0, "warning": 0, "info": 0},
        "resolved_total": 0,
    }
    assert pq.read_table(tmp_path / "resolved.parquet").num_rows == 0


def test_the_next_run_carries_first_seen_and_lists_what_is_new_and_what_was_resolved(tmp_path: Path) -> None:
    publish(tmp_path, [ORPHAN, MISSING, CURSOR], T1, None)
    lookup = h.discover(tmp_path, h.HistoryOptions(), {"cluster_name": "east"})
    assert lookup.previous is not None and lookup.note is None
    assert (lookup.previous.source, lookup.previous.as_of_ms) == (str(tmp_path), T1)
    # the orphan is repaired; the missing ledger turned warning (same finding); the cursor named ""
    # stays, and a cursor with no name (null, not "") is new
    again = dict(MISSING, severity="warning")
    new_orphan = dict(ORPHAN, ledger_id=13, path="/ledgers/L13")
    c = publish(tmp_path, [again, CURSOR, NO_CURSOR, new_orphan], T2, lookup.previous)
    rows = by_kind(published(tmp_path))
    assert rows[("missing_ledger", 12)]["new"] is False and rows[("missing_ledger", 12)]["first_seen"] == T1
    assert rows[("inactive_cursor", "")]["new"] is False and rows[("inactive_cursor", "")]["first_seen"] == T1
    assert (
        rows[("inactive_cursor", None)]["new"] is True and rows[("inactive_cursor", None)]["first_seen"] == T2
    )
    assert rows[("orphan_ledger", 13)]["new"] is True and rows[("orphan_ledger", 13)]["first_seen"] == T2
    resolved = pq.read_table(tmp_path / "resolved.parquet").to_pylist()
    assert [(r["kind"], r["ledger_id"], r["first_seen"], r["last_seen"], r["bytes"]) for r in resolved] == [
        ("orphan_ledger", 11, T1, T1, 300)
    ]
    s = c.summary()
    assert (s["new_total"], s["new_by_severity"]) == (2, {"critical": 0, "warning": 1, "info": 1})
    assert (s["resolved_total"], s["resolved_by_severity"]["warning"]) == (1, 1)
    assert s["previous"] == {"as_of_ms": T1, "source": str(tmp_path)}

    # a third run: first_seen still the first run's for what never went away
    third = h.discover(tmp_path, h.HistoryOptions(), {"cluster_name": "east"}).previous
    publish(tmp_path, [again], T3, third)
    (only,) = published(tmp_path)
    assert (only["first_seen"], only["new"]) == (T1, False)


def test_the_previous_run_is_the_explicit_one_else_the_published_one_else_the_newest_history_entry(
    tmp_path: Path,
) -> None:
    out, other = tmp_path / "out", tmp_path / "other"
    out.mkdir()
    other.mkdir()
    assert h.discover(out, h.HistoryOptions(), {}) == h.Lookup(None)  # nothing: a first run, no note
    publish(out, [ORPHAN], T1, None)
    publish(out, [ORPHAN, MISSING], T2, h.read_previous(out))
    publish(other, [CURSOR], T3, None)
    assert h.discover(out, h.HistoryOptions(), {}).previous.as_of_ms == T2  # type: ignore[union-attr]
    explicit = h.discover(out, h.HistoryOptions.of(other, None), {}).previous
    assert explicit is not None and (explicit.source, explicit.as_of_ms) == (str(other.resolve()), T3)
    # the published run gone (a scheduler's clean-up): the newest history entry, and it is slim
    for name in ("findings.parquet", "summary.json", "resolved.parquet"):
        p = out / name
        if p.is_dir():
            import shutil

            shutil.rmtree(p)
        else:
            p.unlink()
    entries = h.entries(out / h.HISTORY_DIR)
    assert len(entries) == 2
    found = h.discover(out, h.HistoryOptions(), {}).previous
    assert found is not None and (found.source, found.as_of_ms) == (str(entries[-1]), T2)
    assert found.findings.schema.names == schemas.columns(schemas.FINDINGS_HISTORY)
    assert sorted(found.findings.column("kind").to_pylist()) == ["missing_ledger", "orphan_ledger"]
    assert json.loads((entries[-1] / "summary.json").read_text())["new_total"] == 1


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("garbage-parquet", "cannot read it"),
        ("no-as-of", "no as_of_ms"),
        ("no-findings", "findings.parquet is missing"),
        ("not-json", "cannot read it"),
    ],
)
def test_an_unreadable_previous_run_is_one_note_and_the_run_goes_on_as_a_first_run(
    tmp_path: Path, damage: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(tmp_path, [ORPHAN], T1, None)
    parts = list((tmp_path / "findings.parquet").iterdir())
    if damage == "garbage-parquet":
        parts[0].write_bytes(b"PAR1 this is no parquet file")
    elif damage == "no-as-of":
        (tmp_path / "summary.json").write_text('{"cluster_name": "east"}')
    elif damage == "no-findings":
        parts[0].unlink()
        (tmp_path / "findings.parquet").rmdir()
    else:
        (tmp_path / "summary.json").write_text("{not json")
    lookup = h.discover(tmp_path, h.HistoryOptions(), {"cluster_name": "east"})
    assert lookup.previous is None
    assert lookup.note is not None and lookup.note.startswith(f"previous run {tmp_path} not compared: ")
    assert problem in lookup.note and "\n" not in lookup.note
    h.warn(lookup)
    err = capsys.readouterr().err
    assert err == f"ledgerlens: warning: {lookup.note}\n"
    c = h.Comparison(lookup.previous, T2)
    assert c.annotate(table([ORPHAN])).column("new").to_pylist() == [True]


def test_a_previous_run_of_another_cluster_is_not_compared(tmp_path: Path) -> None:
    publish(tmp_path, [ORPHAN], T1, None)
    lookup = h.discover(tmp_path, h.HistoryOptions(), {"cluster_name": "west"})
    assert lookup.previous is None
    assert (
        lookup.note == f"previous run {tmp_path} not compared: it audited cluster east, this run audits west"
    )
    prev = {"cluster_name": None, "sources": {"bookkeeper": {"location": "zk1:2181/ledgers"}}}
    assert h.other_cluster(prev, {"sources": {"bookkeeper": {"location": "zk9:2181/ledgers"}}}) == (
        "it read zk1:2181/ledgers, this run reads zk9:2181/ledgers"
    )
    assert h.other_cluster(prev, {"sources": {"bookkeeper": {"location": "zk1:2181/ledgers"}}}) is None
    assert h.other_cluster({"system": "kafka", "store": "s3://a"}, {"cluster_name": "east"}) == (
        "it audited kafka, this run audits pulsar"
    )
    assert h.other_cluster({"system": "kafka", "store": "s3://a"}, {"system": "kafka", "store": "s3://b"})


def test_findings_of_an_older_release_were_first_seen_at_its_as_of(tmp_path: Path) -> None:
    (tmp_path / "findings.parquet").mkdir()
    pq.write_table(table([ORPHAN, MISSING]), tmp_path / "findings.parquet" / "part-0.parquet")
    (tmp_path / "summary.json").write_text(json.dumps({"as_of_ms": T1}))
    previous = h.read_previous(tmp_path)
    assert previous.findings.column("first_seen").to_pylist() == [T1, T1]
    c = h.Comparison(previous, T2)
    assert c.annotate(table([ORPHAN])).column("first_seen").to_pylist() == [T1]


def test_history_keeps_the_newest_n_runs_and_zero_keeps_none(tmp_path: Path) -> None:
    c = h.Comparison(None, T1)
    c.annotate(table([ORPHAN]))
    for _ in range(4):
        assert h.record(tmp_path, {"as_of_ms": T1}, c, 3) is not None
    (tmp_path / h.HISTORY_DIR / ".tmp-crashed").mkdir()  # a run that died while writing its entry
    before = h.entries(tmp_path / h.HISTORY_DIR)
    assert len(before) == 4
    removed = h.prune(tmp_path / h.HISTORY_DIR, 3)
    assert removed == sorted([".tmp-crashed", before[0].name])
    assert h.entries(tmp_path / h.HISTORY_DIR) == before[1:]
    assert h.record(tmp_path, {"as_of_ms": T1}, c, 0) is None
    assert h.prune(tmp_path / h.HISTORY_DIR, 0) == []  # 0 disables: what is there stays
    assert h.entries(tmp_path / h.HISTORY_DIR) == before[1:]


def test_options_are_checked_and_read_from_the_recorded_settings(tmp_path: Path) -> None:
    assert h.HistoryOptions.of(None, None) == h.HistoryOptions(None, 14)
    assert h.HistoryOptions.of("", "0").keep == 0
    with pytest.raises(ConfigError, match="--history-keep must be 0 .no history. or more, not -1"):
        h.HistoryOptions.of(None, -1)
    with pytest.raises(ConfigError, match="--history-keep must be a number of runs"):
        h.HistoryOptions.of(None, "many")
    with pytest.raises(ConfigError, match="not a directory"):
        h.HistoryOptions.of(tmp_path / "nowhere", None)
    context = {"settings": {"audit.previous": {"value": str(tmp_path)}, "audit.history-keep": {"value": "5"}}}
    assert h.HistoryOptions.from_context(context) == h.HistoryOptions(tmp_path.resolve(), 5)
    assert h.HistoryOptions.from_context(None) == h.HistoryOptions()


def test_annotating_spark_written_parts_matches_the_driver(tmp_path: Path) -> None:
    previous_dir = tmp_path / "prev"
    previous_dir.mkdir()
    publish(previous_dir, [ORPHAN, MISSING], T1, None)
    previous = h.read_previous(previous_dir)
    rows = [MISSING, CURSOR, ORPHAN, NO_CURSOR]
    parts = tmp_path / "findings.parquet"
    parts.mkdir()
    pq.write_table(table(rows[:2]), parts / "part-00000-a.zstd.parquet")
    pq.write_table(table(rows[2:]), parts / "part-00001-b.zstd.parquet")
    (parts / "_SUCCESS").write_text("")
    on_disk = h.Comparison(previous, T2)
    h.annotate_parquet(parts, on_disk)
    in_memory = h.Comparison(previous, T2)
    expected = in_memory.annotate(table(rows)).to_pylist()
    assert pq.read_table(parts).to_pylist() == expected
    assert sorted(p.name for p in parts.iterdir()) == ["_SUCCESS", "part-00000.zstd.parquet"]
    assert on_disk.summary() == in_memory.summary()


def test_publishing_adds_the_history_entry_beside_the_older_ones(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for as_of, rows in ((T1, [ORPHAN]), (T2, [MISSING])):
        with OutputDir(out) as od:
            previous = h.discover(out, h.HistoryOptions(), {}).previous
            publish(od.staging, rows, as_of, previous)
            od.publish()
    entries = h.entries(out / h.HISTORY_DIR)
    assert [json.loads((e / "summary.json").read_text())["as_of_ms"] for e in entries] == [T1, T2]
    assert [r["kind"] for r in pq.read_table(out / "resolved.parquet").to_pylist()] == ["orphan_ledger"]
    manifest = json.loads((out / ".ledgerlens-manifest.json").read_text())["names"]
    assert "history" not in manifest and "resolved.parquet" in manifest
    # a nested run (the runbook inside ``ledgerlens report``) publishes into the outer staging
    # directory; the outer run's publish then adds the entry to --out/history
    with OutputDir(out) as outer:
        with OutputDir(outer.staging) as inner:
            from ledgerlens.runtime.outdir import published_dir

            assert published_dir(inner.out) == out.resolve()
            previous = h.discover(published_dir(inner.out), h.HistoryOptions(), {}).previous
            assert previous is not None and previous.as_of_ms == T2
            publish(inner.staging, [MISSING], T3, previous)
            inner.publish()
        outer.publish()
    assert len(h.entries(out / h.HISTORY_DIR)) == 3


def test_fail_on_new_looks_at_new_findings_only() -> None:
    from ledgerlens.cli import EXIT_FINDINGS, EXIT_OK, build_parser, exit_code

    known = {
        "counts_by_severity": {"critical": 2, "warning": 1},
        "new_by_severity": {"critical": 0, "warning": 1},
    }
    assert exit_code(known, "critical") == EXIT_FINDINGS
    assert exit_code(known, "new-critical") == EXIT_OK
    assert exit_code(known, "new-warning") == EXIT_FINDINGS
    assert exit_code({"new_by_severity": {"critical": 1}}, "new-critical") == EXIT_FINDINGS
    assert exit_code({"counts_by_severity": {"critical": 1}}, "new-critical") == EXIT_OK  # nothing compared
    for command in ("audit", "report"):
        args = build_parser().parse_args(
            [
                command,
                "--zookeeper",
                "h:1",
                "--out",
                "o",
                "--fail-on",
                "new-critical",
                "--previous",
                "p",
                "--history-keep",
                "3",
            ]  # fmt: skip
        )
        assert (args.fail_on, args.previous, args.history_keep) == ("new-critical", "p", "3")
    kafka = build_parser().parse_args(
        ["kafka-audit", "--out", "o", "--fail-on", "new-warning", "--previous", "p"]
    )
    assert (kafka.fail_on, kafka.previous) == ("new-warning", "p")


def test_the_settings_travel_through_a_context_and_the_environment(tmp_path: Path) -> None:
    from ledgerlens.settings import contexts

    cfg = tmp_path / "contexts.toml"
    cfg.write_text('[contexts.east.audit]\nfail-on = "new-critical"\nhistory-keep = 30\n')
    s = contexts.resolve("east", config=cfg, env={})
    assert (s["audit.fail-on"], s["audit.history-keep"], s["audit.previous"]) == ("new-critical", 30, "")
    s = contexts.resolve(
        "east", config=cfg, env={"LEDGERLENS_HISTORY_KEEP": "2", "LEDGERLENS_PREVIOUS": str(tmp_path)}
    )
    assert (s["audit.history-keep"], s["audit.previous"]) == (2, str(tmp_path))
    assert h.HistoryOptions.from_context(s.public()) == h.HistoryOptions(tmp_path.resolve(), 2)


def test_report_hands_its_flags_to_the_runbook_kernel_through_the_environment(tmp_path: Path) -> None:
    from ledgerlens.cli import _history_env

    before = {k: os.environ.get(k) for k in ("LEDGERLENS_PREVIOUS", "LEDGERLENS_HISTORY_KEEP")}
    args = argparse.Namespace(previous=str(tmp_path), history_keep="4")
    with _history_env(args):
        assert os.environ["LEDGERLENS_PREVIOUS"] == str(tmp_path.resolve())
        assert os.environ["LEDGERLENS_HISTORY_KEEP"] == "4"
    assert {k: os.environ.get(k) for k in before} == before


def test_the_summary_line_says_what_changed() -> None:
    from ledgerlens.runtime.console import summary_line

    base = {"counts_by_severity": {"critical": 1, "warning": 1}, "total_findings": 2, "new_total": 2}
    line = summary_line(
        {**base, "previous": None}, worst="missing_ledger ledger 12", findings="o/findings.parquet"
    )
    assert line.endswith(
        "; worst: missing_ledger ledger 12; first run: nothing to compare; findings: o/findings.parquet"
    )
    since = {
        **base,
        "new_total": 1,
        "resolved_total": 1,
        "previous": {"as_of_ms": 1_795_748_400_000, "source": "o"},
    }
    assert "; 1 new, 1 resolved since 2026-11-27 03:00 UTC" in summary_line(since)
    unusable = {**base, "previous": None, "previous_note": "previous run o not compared: ..."}
    assert "; previous run not compared (summary.json: previous_note)" in summary_line(unusable)
    assert "new" not in summary_line({"counts_by_severity": {}, "total_findings": 0})  # an older summary


def test_metrics_carry_new_and_resolved_counts_under_the_cluster_name(tmp_path: Path) -> None:
    from ledgerlens.cli import _cluster_label
    from ledgerlens.report import metrics

    summary = {
        "cluster_name": "east",
        "counts_by_severity": {"critical": 1},
        "new_by_severity": {"critical": 1, "warning": 0, "info": 0},
        "resolved_by_severity": {"critical": 0, "warning": 2, "info": 0},
    }
    args = argparse.Namespace(cluster_name=None, zookeeper="zk1:2181/pulsar", out=str(tmp_path))
    label = _cluster_label(args, None, summary)
    assert label == "east"
    text = metrics.render(summary, cluster=label, success=True, last_success_s=1.0)
    assert 'ledgerlens_audit_new_findings{cluster="east",severity="critical"} 1' in text
    assert 'ledgerlens_audit_new_findings{cluster="east",severity="info"} 0' in text
    assert 'ledgerlens_audit_resolved_findings{cluster="east",severity="warning"} 2' in text
    assert "# TYPE ledgerlens_audit_resolved_findings gauge" in text
    assert "new_findings" not in metrics.render(
        {"cluster_name": "east"}, cluster="east", success=True, last_success_s=1.0
    )
    # a failed run has no summary: the name the last published run recorded, else the address
    assert _cluster_label(args, None, None) == "zk1:2181/pulsar"
    (tmp_path / "summary.json").write_text(json.dumps({"cluster_name": "east"}))
    assert _cluster_label(args, None, None) == "east"


def test_findings_that_differ_only_after_a_null_column_stay_apart(tmp_path: Path) -> None:
    """Two corrupt ledgers have no component (null) and differ only in ledger id and path: two
    findings, each compared on its own (a NUL null marker once merged them in pandas' hash tables)."""
    a = finding(
        "corrupt_metadata", "critical", ledger_id=3_000_007_608, path="/ledgers/000/0000/0030/0000/L7608"
    )
    b = finding("corrupt_metadata", "critical", ledger_id=1149, path="/ledgers/00/0000/L1149")
    publish(tmp_path, [a, b], T1, None)
    c = publish(
        tmp_path, [b, dict(a, ledger_id=5, path="/ledgers/00/0000/L0005")], T2, h.read_previous(tmp_path)
    )
    assert [(r["ledger_id"], r["new"]) for r in published(tmp_path)] == [(1149, False), (5, True)]
    assert [r["ledger_id"] for r in pq.read_table(tmp_path / "resolved.parquet").to_pylist()] == [
        3_000_007_608
    ]
    assert (c.summary()["new_total"], c.summary()["resolved_total"]) == (1, 1)
