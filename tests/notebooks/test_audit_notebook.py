"""The audit runbook: stored clean, executed by papermill, recorded, exported to a self-contained report.

The end-to-end test runs the same planted cluster through ``ledgerlens audit`` (the CLI) and through
``ledgerlens report`` (papermill + nbconvert) and checks both agree. The other tests exercise the
report helpers on small hand-built notebooks (no kernel, no servers).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from html import escape
from pathlib import Path
from typing import Any

import nbformat
import pandas as pd
import plotly.graph_objects as go
import pytest

from ledgerlens import report
from ledgerlens.inventory.schemas import FINDINGS, columns
from ledgerlens.report import html as report_html
from ledgerlens.report.runbook import RECORD_MIME
from ledgerlens.report.text import impact_tier

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "notebooks" / "audit_ledgers.ipynb"
NOW_MS = 1_795_000_000_000  # fixed 'now', so both runs see the same cluster age
PARAMETERS = (
    "context", "sandbox", "zookeeper", "s3_endpoint", "bucket", "out_dir", "min_orphan_age", "as_of",
    "spark_master", "ledgers_root", "cluster_name", "interactive",
)  # fmt: skip


# --- the stored runbook ------------------------------------------------------------------------------


def test_runbook_is_stored_without_outputs() -> None:
    nb = nbformat.read(str(RUNBOOK), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    assert nb.metadata.kernelspec.name == "python3"
    assert "widgets" not in nb.metadata
    # the answer and the pictures before the long parts: header (banner, at a glance), figures,
    # what was audited, the findings, the rules
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    views = ("header_html", "report_figures", "audited_html", "findings_html", "rules_html")
    at = [next(i for i, src in enumerate(code) if name in src) for name in views]
    assert at == sorted(at) and len(set(at)) == 5


def test_runbook_parameters_are_documented() -> None:
    import papermill as pm

    params = pm.inspect_notebook(str(RUNBOOK))
    for name in PARAMETERS:
        assert name in params, name
        assert params[name]["help"], f"{name} has no help comment"
    assert params["zookeeper"]["default"] == '""'  # empty: the sandbox's, else from the context
    assert params["context"]["default"] == '""' and params["context"]["help"]
    assert params["sandbox"]["default"] == '""'
    assert params["interactive"]["inferred_type_name"] == "bool"
    # never a credential as a parameter
    assert not [p for p in params if any(w in p.lower() for w in ("secret", "token", "password", "key"))]


# --- report helpers on hand-built notebooks ------------------------------------------------------------


def _findings(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns(FINDINGS))


def _executed_notebook(path: Path, summary: dict[str, Any], extra_text: str = "") -> Path:
    """A notebook shaped like an executed runbook: a recorded summary and a plotly figure."""
    fig = go.Figure(go.Bar(x=["orphan_ledger"], y=[12345]))
    figure_html = fig.to_html(include_plotlyjs=True, full_html=False, include_mathjax="cdn")
    cell = nbformat.v4.new_code_cell("run_the_audit_42()", execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"application/json": summary},
            metadata={"application/json": {"ledgerlens": "summary"}},
        ),
        nbformat.v4.new_output("display_data", data={"text/html": figure_html}),
        nbformat.v4.new_output("stream", name="stdout", text=extra_text or "done\n"),
        nbformat.v4.new_output("stream", name="stderr", text="[Stage 7:====>  (1 + 2) / 19]\n"),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# audit"), cell])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nbformat.write(nb, str(path))
    return path


def test_read_recorded(tmp_path: Path) -> None:
    nb = _executed_notebook(tmp_path / "nb.ipynb", {"total_findings": 3})
    assert report.read_recorded(nb) == {"total_findings": 3}
    with pytest.raises(report.ReportError, match="no output recorded as 'other'"):
        report.read_recorded(nb, "other")


def test_to_html_is_self_contained(tmp_path: Path) -> None:
    nb = _executed_notebook(tmp_path / "nb.ipynb", {"total_findings": 3})
    html = report.to_html(nb, tmp_path / "out" / "report.html").read_text()
    assert "plotly-graph-div" in html and "Plotly.newPlot" in html
    assert '"orphan_ledger"' in html and "12345" in html  # figure data inline
    assert "plotly.js v" in html  # the library itself inline
    assert report.external_scripts(html) == []
    assert "require.min.js" not in html and "html-manager" not in html
    assert "run_the_audit_42" not in html  # code hidden by default
    assert "[Stage 7:" not in html  # Spark's stderr left out
    shown = report.to_html(nb, tmp_path / "code.html", exclude_input=False).read_text()
    assert "run_the_audit_42" in shown
    assert "[Stage 7:" in report.to_html(nb, tmp_path / "err.html", keep_stderr=True).read_text()


def test_secrets_are_redacted_or_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-" + uuid.uuid4().hex
    monkeypatch.setenv("PULSAR_AUTH_TOKEN", secret)
    nb = _executed_notebook(
        tmp_path / "nb.ipynb", {"total_findings": 0}, extra_text=f"oops {secret} https://KEY:SECRET@h\n"
    )
    html = report.to_html(nb, tmp_path / "report.html").read_text()
    assert secret not in html and "KEY:SECRET" not in html
    assert "oops *** https://***@h" in html
    assert "Plotly.newPlot" in html  # inline scripts survive redaction
    clean = report.redact_notebook_file(nb).read_text()
    assert secret not in clean and "KEY:SECRET" not in clean
    with pytest.raises(report.SecretLeakError, match="runbook parameters"):
        report.execute_runbook(RUNBOOK, tmp_path / "x.ipynb", {"zookeeper": secret})


def test_secret_values_ignore_short_and_unrelated() -> None:
    env = {
        "AWS_SECRET_ACCESS_KEY": "abcdefgh",
        "AWS_SESSION_TOKEN": "tok-123456",
        "DB_PASSWORD": "hunter22",
        "GITHUB_TOKEN_ENABLED": "1",
        "HOME": "/root",
    }
    assert report.secret_values(env) == {
        "AWS_SECRET_ACCESS_KEY": "abcdefgh",
        "AWS_SESSION_TOKEN": "tok-123456",
        "DB_PASSWORD": "hunter22",
    }
    report.check_no_secrets("nothing here", "x", env)
    with pytest.raises(report.SecretLeakError, match="DB_PASSWORD"):
        report.check_no_secrets("pw=hunter22", "x", env)


def test_static_table_and_summary_markdown() -> None:
    df = _findings(
        [
            dict(kind="orphan_ledger", severity="warning", ledger_id=1, bytes=10, namespace="a/b"),
            dict(kind="missing_ledger", severity="critical", ledger_id=2, bytes=None),
            dict(kind="orphan_ledger", severity="warning", ledger_id=3, bytes=5000, cursor="<sub>"),
        ]
    )
    top = report.top_findings(df, 2)
    assert top["ledger_id"].tolist() == [2, 3]
    html = report.findings_table_html(top, caption="2 of 3")
    assert "&lt;sub&gt;" in html and "<sub>" not in html  # escaped
    assert "4.9 KiB" in html and "<caption>2 of 3</caption>" in html
    md = report.summary_markdown(
        {
            "total_findings": 3,
            "counts_by_severity": {"critical": 1, "warning": 2, "info": 0},
            "counts_by_kind": {"orphan_ledger": 2, "missing_ledger": 1},
            "bytes_by_kind": {"orphan_ledger": 5010},
            "dropped_on_reverify": {"orphan_ledger": 1, "missing_ledger": 0},
        }
    )
    assert md.startswith("**3 findings**: 1 critical, 2 warning, 0 info")
    assert "| `orphan_ledger` | 2 | 4.9 KiB |" in md
    assert "Dropped on re-verification: orphan_ledger 1" in md


def test_papermill_records_and_failures(tmp_path: Path) -> None:
    """A real kernel: papermill injects parameters, ``record`` survives, a failing cell is one line."""
    params = nbformat.v4.new_code_cell("answer: int = 0  # the answer\nfail: bool = False  # raise")
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "from ledgerlens import report\n"
        'report.record("summary", {"answer": answer, "as_of_ms": 2**53})\n'
        'if fail:\n    raise ValueError("boom\\nsecond line")'
    )
    nb = nbformat.v4.new_notebook(cells=[params, body])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "tiny.ipynb"
    nbformat.write(nb, str(source))

    out = report.execute_runbook(
        source, tmp_path / "out" / "tiny.ipynb", {"answer": 42}, kernel_name="python3"
    )
    assert report.read_recorded(out) == {"answer": 42, "as_of_ms": 2**53}
    # a record is data in the notebook, not a JSON tree on the page: no front end renders its type
    (recorded,) = [o for c in nbformat.read(str(out), as_version=4).cells for o in c.get("outputs", [])]
    assert list(recorded["data"]) == [RECORD_MIME]
    with pytest.raises(report.ReportError, match=r"cell \d+ failed: ValueError: boom \(details in ") as e:
        report.execute_runbook(source, tmp_path / "failed.ipynb", {"fail": True})
    assert "second line" not in str(e.value)
    assert (tmp_path / "failed.ipynb").exists()


# --- the runbook against a planted cluster -------------------------------------------------------------


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledgerlens.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ.copy(),  # the s3_server fixture's dummy AWS credentials
        check=False,
    )


@pytest.fixture(scope="module")
def planted_cluster(zookeeper: Any, s3_server: Any) -> dict[str, str]:
    """A generated cluster with planted anomalies under a fresh chroot and bucket."""
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.cluster import generate

    chroot = f"/runbook-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    client.ensure_path(chroot)
    client.stop()
    client.close()
    hosts = zookeeper.hosts + chroot
    bucket = f"runbook-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1").create_bucket(
        Bucket=bucket
    )
    generate(
        hosts, root="", s3_endpoint=s3_server.endpoint_url, bucket=bucket, scenario="planted", now_ms=NOW_MS
    )
    return {"zookeeper": hosts, "s3_endpoint": s3_server.endpoint_url, "bucket": bucket}


@pytest.mark.integration
@pytest.mark.spark
def test_runbook_report_matches_cli_audit(planted_cluster: dict[str, str], tmp_path: Path) -> None:
    inputs = [
        "--zookeeper", planted_cluster["zookeeper"], "--s3-endpoint", planted_cluster["s3_endpoint"],
        "--bucket", planted_cluster["bucket"], "--as-of", str(NOW_MS), "--spark-master", "local[2]",
    ]  # fmt: skip
    audit_dir, report_dir = tmp_path / "audit", tmp_path / "report"

    audit = _cli("audit", *inputs, "--out", str(audit_dir), "--no-progress")
    assert audit.returncode == 0, audit.stderr[-3000:]
    assert "findings:" in audit.stdout and "summary.json" in audit.stdout
    cli_summary = json.loads((audit_dir / "summary.json").read_text())

    rep = _cli("report", *inputs, "--out", str(report_dir))
    assert rep.returncode == 0, rep.stderr[-3000:]
    executed, html_path = report_dir / "audit_ledgers.ipynb", report_dir / "report.html"
    assert str(html_path) in rep.stdout

    recorded = report.read_recorded(executed, "summary")
    assert recorded["as_of_ms"] == NOW_MS
    assert recorded["total_findings"] > 0 and recorded["counts_by_severity"]["critical"] > 0
    timing_free = {k: v for k, v in recorded.items() if k not in ("timings", "context")}
    assert timing_free == {k: v for k, v in cli_summary.items() if k not in ("timings", "context")}
    # the same resolved settings; only their origin differs (CLI flags, runbook parameters)
    values = {k: v["value"] for k, v in recorded["context"]["settings"].items()}
    assert values == {k: v["value"] for k, v in cli_summary["context"]["settings"].items()}
    assert recorded["context"]["settings"]["metadata.zookeeper"]["origin"] == "parameter zookeeper"
    assert cli_summary["context"]["settings"]["metadata.zookeeper"]["origin"] == "flag --zookeeper"
    # the notebook's run wrote the same summary file as the CLI's
    assert (
        json.loads((report_dir / "summary.json").read_text())["counts_by_kind"]
        == cli_summary["counts_by_kind"]
    )

    # the findings themselves agree, row for row
    a = pd.read_parquet(audit_dir / "findings.parquet").drop(columns=["evidence"])
    b = pd.read_parquet(report_dir / "findings.parquet").drop(columns=["evidence"])
    assert len(a) == len(b) == cli_summary["total_findings"]
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))

    nb = nbformat.read(str(executed), as_version=4)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not any(o.get("output_type") == "error" for o in outputs)
    assert not any("application/json" in o.get("data", {}) for o in outputs)  # no raw JSON tree shown
    plotly_json = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    disk = (report_dir / "disk_usage.parquet").exists()
    assert len(plotly_json) == 4 + disk  # JupyterLab draws the executed notebook's figures with plotly

    html = html_path.read_text(encoding="utf-8")
    assert html.count('<figure class="ll-figure"') == 4 + disk  # the report's figures: inline SVG
    assert "plotly.js v" not in html and "Plotly.newPlot" not in html
    for kind in cli_summary["counts_by_kind"]:
        assert f">{kind}<" in html, kind  # figure labels (and the cards) inline
    assert report.external_scripts(html) == []
    assert html.count('class="ll-finding ') == cli_summary["total_findings"]  # every finding, explained
    assert "edit the parameters" not in html and "Run All" not in html  # no runbook instructions
    assert "<title>Pulsar storage audit: " in html
    assert len(html.encode()) <= 1024 * 1024
    # the banner names the worst finding; the cards follow the impact order, data loss first
    worst = report_html.worst_finding(pd.read_parquet(report_dir / "findings.parquet"))
    assert f"Worst: <code>{escape(worst)}</code>" in html
    cards = re.findall(r'class="ll-finding ll-sev-(\w+)[^"]*" data-kind="(\w+)"', html)
    assert [impact_tier(k, sev) for sev, k in cards] == sorted(impact_tier(k, sev) for sev, k in cards)


def test_runbook_takes_durations_as_numbers_and_checks_before_spark(tmp_path: Path) -> None:
    """papermill passes ``-p min_orphan_age 90`` as an int: accepted (seconds); the first problem is
    then the unreachable ZooKeeper, found by the preflight before any Spark session starts."""
    from ledgerlens.settings import contexts

    flags = {"zookeeper": "127.0.0.1:2181", "min_orphan_age": 90, "retention_grace": 3600.0}
    _zk, _s3, audit = contexts.resolve(None, flags=flags, flag_layer="parameter").audit_inputs("")
    assert (audit.min_orphan_age_s, audit.retention_grace_s) == (90, 3600)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = {
        "zookeeper": f"127.0.0.1:{port}",
        "min_orphan_age": 90,
        "retention_grace": 60,
        "interactive": False,
    }
    t0 = time.monotonic()
    with pytest.raises(report.ReportError) as e:
        report.execute_runbook(RUNBOOK, tmp_path / "nb.ipynb", {**params, "out_dir": str(tmp_path / "out")})
    assert time.monotonic() - t0 < 120  # a kernel's start-up and the 10 s check, never a Spark session
    assert not (tmp_path / "out").exists()
    assert (
        f"SourceError: zookeeper 127.0.0.1:{port}: unreachable: 127.0.0.1:{port} connection refused"
        in str(e.value)
    )
    nb = nbformat.read(str(tmp_path / "nb.ipynb"), as_version=4)
    text = json.dumps(nb)
    assert "TypeError" not in text and "SparkSession" not in text
