"""Report views, metrics, console output and sandbox inputs, as data (the browser tests look at pixels)."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ledgerlens.errors import ConfigError
from ledgerlens.inventory.schemas import FINDINGS, columns
from ledgerlens.report import context as ctx
from ledgerlens.report import html, metrics
from ledgerlens.report import html as report_html
from ledgerlens.runtime import console
from ledgerlens.settings import inputs
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource

pytestmark = pytest.mark.unit


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns(FINDINGS))


def summary(critical: int = 0, warning: int = 0, info: int = 0, scanned: int = 10) -> dict[str, Any]:
    return {
        "as_of_ms": 1_795_000_000_000,
        "total_findings": critical + warning + info,
        "counts_by_severity": {"critical": critical, "warning": warning, "info": info},
        "bytes_by_severity": {"critical": 0, "warning": 2048 * warning, "info": 0},
        "counts_by_kind": {},
        "by_kind_severity": [
            {"kind": "corrupt_metadata", "severity": "critical", "count": critical, "bytes": 0},
            {"kind": "orphan_ledger", "severity": "warning", "count": warning, "bytes": 2048 * warning},
        ],
        "inventory_counts": {"bk_ledgers": scanned, "managed_ledgers": 2, "bk_ledgers.reads": 99},
        "timings": {"collect": 1.5, "audit": 2.0, "reverify": 0.5, "write": 0.25, "total": 4.4},
    }


CONTEXT = {
    "cluster": "pulsar-east",
    "zookeeper": "zk1:2181/pulsar",
    "ledgers_root": "/ledgers",
    "bucket": "offload-b",
    "s3_endpoint": "https://***@s3.local",
    "source": "ZooKeeper (live)",
    "as_of_ms": 1_795_000_000_000,
    "scanned": {"bk_ledgers": 10, "managed_ledgers": 2, "offload_objects": 0},
    "thresholds": {"min_orphan_age_s": 86400, "retention_grace_s": 21600},
    "ledgerlens_version": "0.1.0",
    "duration_s": 4.4,
}


# --- banner and context ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("counts", "state", "headline"),
    [
        ({"critical": 3, "warning": 20}, "critical", "3 critical findings, 20 warnings"),
        ({"warning": 1}, "warning", "1 warning"),
        ({"info": 2}, "healthy", "Healthy: no critical or warning findings (2 informational findings)"),
        ({}, "healthy", "Healthy: no critical or warning findings"),
    ],
)
def test_banner_states(counts: dict[str, int], state: str, headline: str) -> None:
    s = summary(**counts)
    assert html.status(s, CONTEXT) == (state, headline)
    banner = html.banner_html(s, CONTEXT)
    assert f'data-status="{state}"' in banner and headline in banner


def test_scanning_nothing_is_not_healthy() -> None:
    empty = dict(CONTEXT, scanned={"bk_ledgers": 0, "managed_ledgers": 0})
    state, headline = html.status(summary(), empty)
    assert state == "empty" and "Nothing was audited" in headline


def test_context_says_what_was_audited() -> None:
    page = html.context_html(CONTEXT)
    for text in ("pulsar-east", "zk1:2181/pulsar", "offload-b", "2026-11-18", "10 BookKeeper ledgers",
                 "2 managed ledgers (topics)", "ledgerlens 0.1.0", "4.4 s", "1.0 d"):  # fmt: skip
        assert text in page, text
    no_bucket = html.context_html(dict(CONTEXT, bucket=""))
    assert "offload rules did not run" in no_bucket


def test_audit_context_redacts_and_counts() -> None:
    zk = ZooKeeperSource(hosts="zk1:2181/pulsar")
    s3 = S3Source(bucket="b", endpoint_url="https://AKIAXXXX:hunter2@s3.local/?X-Amz-Signature=abc")
    c = ctx.audit_context(summary(), zk, s3, AuditConfig(as_of_ms=5), cluster_name="east")
    assert c["cluster"] == "east" and c["zookeeper"] == "zk1:2181/pulsar"
    assert (
        "hunter2" not in json.dumps(c)
        and "abc" not in c["s3_endpoint"]
        and "***@s3.local" in c["s3_endpoint"]
    )
    assert c["scanned"] == {"bk_ledgers": 10, "managed_ledgers": 2}  # no scan statistics
    assert c["duration_s"] == 4.4 and c["as_of_ms"] == 1_795_000_000_000
    assert ctx.report_title(c) == "Pulsar storage audit: east, 2026-11-18 11:06 UTC"
    # no name given: the single cluster the audit found under /admin/clusters names the report
    found = ctx.audit_context(dict(summary(), cluster_name="west"), zk, s3, AuditConfig(as_of_ms=5))
    assert found["cluster"] == "west" and found["cluster_named"]
    nameless = ctx.audit_context(summary(), zk, s3, AuditConfig(as_of_ms=5))
    assert nameless["cluster"] == "zk1:2181/pulsar" and not nameless["cluster_named"]


# --- findings ----------------------------------------------------------------------------------------


def planted() -> pd.DataFrame:
    return frame(
        [
            dict(kind="orphan_ledger", severity="warning", ledger_id=11, bytes=4096, age_seconds=7200,
                 managed_ledger="t/ns/persistent/a", path="/managed-ledgers/t/ns/persistent/a",
                 evidence='{"owner_exists": true, "ctime_ms": 1794000000000}'),
            dict(kind="corrupt_metadata", severity="critical", ledger_id=42, path="/ledgers/00/0000/L0042",
                 evidence='{"table": "bk_ledgers", "problem": "ensembleSize: banana"}'),
            dict(kind="unattributed_ledger", severity="info", ledger_id=7, bytes=1, evidence="{}"),
        ]
    )  # fmt: skip


def test_findings_html_shows_every_finding_explained_critical_first() -> None:
    page = html.findings_html(planted(), CONTEXT)
    assert page.count('class="ll-finding ') == 3
    assert page.index("corrupt_metadata") < page.index("orphan_ledger") < page.index("unattributed_ledger")
    assert "ensembleSize: banana" in page and "/ledgers/00/0000/L0042" in page
    assert "zookeeper-shell -server zk1:2181/pulsar" in page  # next step with the audited address
    assert "bookkeeper shell ledgermetadata -ledgerid 11" in page
    assert 'href="#rule-corrupt_metadata"' in page
    assert "max-height" not in page  # no fixed-height box
    assert "ctime_ms" in page and "2026-11-06 21:20 UTC" in page  # evidence, times readable


def test_big_groups_stay_on_the_page_in_a_collapsed_table() -> None:
    rows = [dict(kind="orphan_ledger", severity="warning", ledger_id=i, bytes=1) for i in range(130)]
    page = html.findings_html(frame(rows), group_cards=100)
    assert page.count('class="ll-finding ') == 100
    assert "30 more orphan_ledger findings" in page
    assert all(f"ledger {i}<" in page or f"ledger {i} " in page for i in range(130))
    capped = html.findings_html(frame(rows), max_rows=50, findings_path="/x/findings.parquet")
    assert "80 more findings" in capped and "/x/findings.parquet" in capped


def test_detail_panel_has_all_fields_evidence_next_step_and_rule() -> None:
    row = planted().iloc[1].to_dict()
    page = html.finding_detail_html(row, CONTEXT)
    for text in ("ensembleSize: banana", "/ledgers/00/0000/L0042", "zookeeper-shell", "problem", "bk_ledgers",
                 "docs/audit-rules.md#corrupt_metadata", "the rule"):  # fmt: skip
        assert text in page, text
    floaty = html.finding_detail_html({**row, "ledger_id": 42.0}, CONTEXT)
    assert "<th>ledger_id</th><td>42</td>" in floaty  # an id, not 42.0


def test_table_is_escaped_left_aligned_and_wraps() -> None:
    df = frame([dict(kind="orphan_ledger", severity="warning", ledger_id=1, bytes=5000, cursor="<sub>")])
    page = html.findings_table_html(df)
    assert "&lt;sub&gt;" in page and "<sub>" not in page and "4.9 KiB" in page
    assert (
        "text-align:left" in page
        and "table-layout:fixed" in page
        and "nowrap;" not in page.split("</style>")[1]
    )


# --- metrics -------------------------------------------------------------------------------------------


def test_metrics_textfile(tmp_path: Path) -> None:
    path = tmp_path / "ledgerlens.prom"
    metrics.write_textfile(path, summary(critical=3, warning=2), cluster="east")
    text = path.read_text()
    assert 'ledgerlens_audit_findings{cluster="east",kind="corrupt_metadata",severity="critical"} 3' in text
    assert (
        'ledgerlens_audit_finding_bytes{cluster="east",kind="orphan_ledger",severity="warning"} 4096' in text
    )
    assert 'ledgerlens_audit_scanned_rows{cluster="east",table="bk_ledgers"} 10' in text
    assert "bk_ledgers.reads" not in text
    assert 'ledgerlens_audit_duration_seconds{cluster="east"} 4.4' in text
    assert 'ledgerlens_audit_success{cluster="east"} 1' in text
    assert 'ledgerlens_audit_as_of_timestamp_seconds{cluster="east"} 1795000000' in text
    for line in text.splitlines():  # the exposition format: comments or 'name{labels} value'
        assert line.startswith("# ") or re.fullmatch(r"[a-z_]+\{[^}]*\} -?[0-9.e+]+", line), line
    first = metrics.previous_success(path, "east")
    assert first is not None
    metrics.write_failure(path, cluster="east")
    failed = path.read_text()
    assert 'ledgerlens_audit_success{cluster="east"} 0' in failed
    assert metrics.previous_success(path, "east") == first  # last success kept
    assert "ledgerlens_audit_findings" not in failed
    assert not list(tmp_path.glob(".*tmp"))


# --- console --------------------------------------------------------------------------------------------


def test_progress_lines_cover_every_phase() -> None:
    out = io.StringIO()
    p = console.Progress(file=out, bar=False)
    p.begin("collect", steps=2)
    p.start_step("bk_ledgers")
    p.step()
    p.step("managed_ledgers")
    p.end("120 rows scanned")
    for phase in ("audit", "re-verify", "write"):
        with p.phase(phase):
            pass
    p.close()
    lines = out.getvalue().splitlines()
    said = [re.sub(r"[0-9.]+ s$", "N s", ln.split("] ", 1)[1].split(" (")[0]) for ln in lines]
    assert said == [
        "collect 1/2 bk_ledgers",
        "collect 2/2 managed_ledgers",
        "collect done in N s",
        "audit done in N s",
        "re-verify done in N s",
        "write done in N s",
    ]
    assert lines[2].startswith("[ 45%") and lines[-1].startswith("[100%")
    assert "(120 rows scanned)" in lines[2]


def test_collection_stages_count_as_many_steps_as_they_are() -> None:
    """The phase's step count is the stages actually run (set by the collector, not guessed)."""
    out = io.StringIO()
    p = console.Progress(file=out, bar=False)
    p.begin("collect")
    bar = console.stage_bar(p, 6)
    for stage in ("bk_ledgers", "managed_ledgers", "schema_ledgers", "namespace_policies",
                  "offload_objects", "offload_segments"):  # fmt: skip
        bar.set_description(f"collect {stage}")
        assert p._desc() == f"collect {p._step + 1}/6 {stage}"
        bar.update(1)
    bar.close()
    assert p.percent() == pytest.approx(45.0)  # all of collection's share, not more, not less
    p.end()
    said = [ln.split("] ", 1)[1].split(" (")[0] for ln in out.getvalue().splitlines()]
    assert said[0] == "collect 1/6 bk_ledgers" and said[5] == "collect 6/6 offload_segments"


def test_progress_bar_ticks_and_reaches_100() -> None:
    out = io.StringIO()
    p = console.Progress(file=out, bar=True, tick_s=0.01)
    with p.phase("collect", steps=1):
        p.step("x")
    assert p.percent() == pytest.approx(45.0)
    for phase in ("audit", "re-verify", "write"):
        p.begin(phase)
    p.end()
    p.close()
    assert "100%" in out.getvalue() and "write" in out.getvalue()


def test_summary_line() -> None:
    s = summary(critical=3, warning=20, info=6)
    line = console.summary_line(s, worst="corrupt_metadata ledger 42", report="out/report.html")
    assert line == (
        "ledgerlens: 3 critical, 20 warning, 6 info (29 findings, 40.0 KiB); "
        "worst: corrupt_metadata ledger 42; report: out/report.html"
    )
    assert console.summary_line(summary()).startswith("ledgerlens: healthy, 0 findings")
    assert report_html.worst_finding(planted()) == "corrupt_metadata ledger 42"


# --- sandbox inputs ---------------------------------------------------------------------------------------


def _no_contexts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledgerlens.settings import contexts

    empty = tmp_path / "contexts.toml"
    empty.write_text("")
    empty.chmod(0o600)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(empty))
    for k in [k for k in os.environ if k.startswith("LEDGERLENS_") and k != contexts.CONFIG_ENV]:
        monkeypatch.delenv(k)


def test_sandbox_fills_addresses_clock_and_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledgerlens.settings import contexts

    (tmp_path / "state.json").write_text(
        json.dumps({"zk_hosts": "127.0.0.1:2999", "s3_endpoint": "http://127.0.0.1:9", "bucket": "b1"})
    )
    (tmp_path / "ground_truth.json").write_text(json.dumps({"now_ms": 1_795_000_000_000, "root": "/c1"}))
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    _no_contexts(tmp_path, monkeypatch)
    given = inputs.sandbox_flags({"zookeeper": "", "as_of": "", "min_orphan_age": None}, tmp_path)
    zk, s3, audit = contexts.resolve(None, flags=given, flag_layer="parameter").audit_inputs(given["as_of"])
    assert zk.hosts == "127.0.0.1:2999/c1"
    assert (s3.bucket, s3.endpoint_url) == ("b1", "http://127.0.0.1:9")
    assert audit.as_of_ms == 1_795_000_000_000 and audit.min_orphan_age_s == 86400
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == inputs.SANDBOX_AWS_DUMMY
    # explicit values win over the sandbox's; no sandbox: flags unchanged
    mine = inputs.sandbox_flags({"zookeeper": "h:1", "as_of": "1700000000000"}, tmp_path)
    assert mine["zookeeper"] == "h:1" and mine["as_of"] == "1700000000000" and mine["bucket"] == "b1"
    assert inputs.sandbox_flags({"zookeeper": ""}, "") == {"zookeeper": ""}


def test_pulsar_sandbox_thresholds_and_errors(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(
        json.dumps(
            {
                "zookeeper_hosts": "127.0.0.1:1",
                "s3_endpoint": "http://x",
                "bucket": "b",
                "cluster": "sb",
                "web_url": "http://127.0.0.1:8",
            }
        )
    )
    (tmp_path / "ground_truth.json").write_text(json.dumps({"max_age_s": 30, "expected": []}))
    flags = inputs.sandbox_flags({}, tmp_path)
    assert (flags["min_orphan_age"], flags["retention_grace"], flags["cluster_name"]) == ("30s", "30s", "sb")
    assert "as_of" not in flags  # a real cluster: its own clock
    assert flags["admin_url"] == "http://127.0.0.1:8"  # --source admin reads its web service
    with pytest.raises(ConfigError, match="is it up"):
        inputs.sandbox_flags({}, tmp_path / "nope")


def test_cli_sandbox_and_runbook_resolve_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--sandbox DIR`` and the runbook's ``sandbox`` parameter give the same inputs."""
    from ledgerlens import cli
    from ledgerlens.settings import contexts

    (tmp_path / "state.json").write_text(
        json.dumps({"zk_hosts": "127.0.0.1:2999", "s3_endpoint": "http://127.0.0.1:9", "bucket": "b1"})
    )
    (tmp_path / "ground_truth.json").write_text(json.dumps({"now_ms": 1_795_000_000_000}))
    _no_contexts(tmp_path, monkeypatch)
    args = cli.build_parser().parse_args(["report", "--sandbox", str(tmp_path), "--out", str(tmp_path / "o")])
    cli.apply_sandbox(args)
    params = cli.notebook_parameters(args)
    from_cli = cli._settings(args).audit_inputs(args.as_of)
    keys = ("zookeeper", "s3_endpoint", "bucket", "min_orphan_age", "retention_grace", "as_of")
    given = inputs.sandbox_flags({k: params[k] for k in keys}, params["sandbox"])
    from_runbook = contexts.resolve(None, flags=given, flag_layer="parameter").audit_inputs(given["as_of"])
    assert from_cli == from_runbook and from_cli[2].as_of_ms == 1_795_000_000_000
