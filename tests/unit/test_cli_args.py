"""``ledgerlens`` argument parsing and exit codes, with the pipeline and Spark replaced by fakes."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ledgerlens import cli
from ledgerlens.errors import SourceError
from ledgerlens.settings import inputs
from ledgerlens.settings.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens.settings.request import AuditRequest

pytestmark = pytest.mark.unit


@dataclass
class FakeRun:
    out_dir: Path
    findings_path: Path
    summary: dict[str, Any]


@dataclass
class FakePipeline:
    summary: dict[str, Any]
    error: Exception | None = None
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    contexts: list[dict[str, Any] | None] = field(default_factory=list)
    stores: list[Any] = field(default_factory=list)
    options: list[dict[str, Any]] = field(default_factory=list)
    requests: list[AuditRequest] = field(default_factory=list)

    def run(
        self,
        spark: Any,
        zk: ZooKeeperSource,
        s3: S3Source | None,
        audit: AuditConfig,
        out_dir: Any,
        *,
        progress: bool = True,
        context: dict[str, Any] | None = None,
        stores: Any = None,
        cluster_name: str | None = None,
        deep_offload_check: bool = False,
        **_kw: Any,
    ) -> FakeRun:
        self.calls.append((spark, zk, s3, audit, Path(out_dir), progress))
        self.contexts.append(context)
        self.stores.append(stores)
        self.options.append({"cluster_name": cluster_name, "deep_offload_check": deep_offload_check})
        if self.error:
            raise self.error
        _write_findings(Path(out_dir), self.summary)
        return FakeRun(Path(out_dir), Path(out_dir) / "findings.parquet", self.summary)

    def run_request(self, spark: Any, request: AuditRequest, *, progress: Any = True, **_kw: Any) -> FakeRun:
        self.requests.append(request)
        return self.run(
            spark,
            request.zk,  # type: ignore[arg-type]
            request.s3,
            request.config,
            request.out_dir,
            progress=progress,
            context=request.context,
            stores=request.stores,
            cluster_name=request.cluster_name,
            deep_offload_check=request.deep_offload_check,
        )


def _write_findings(out: Path, summary: dict[str, Any]) -> None:
    import pandas as pd

    from ledgerlens.inventory.schemas import FINDINGS, columns

    rows = [
        {"kind": k, "severity": "critical" if k == "missing_ledger" else "warning", "ledger_id": 7}
        for k, n in summary["counts_by_kind"].items()
        for _ in range(n)
    ]
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=columns(FINDINGS)).to_parquet(out / "findings.parquet")


class FakeSpark:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


def summary(critical: int = 0, warning: int = 0, info: int = 0) -> dict[str, Any]:
    kinds = {"missing_ledger": critical, "orphan_ledger": warning, "unattributed_ledger": info}
    return {
        "as_of_ms": 1_700_000_000_000,
        "counts_by_kind": {k: v for k, v in kinds.items() if v},
        "counts_by_severity": {"critical": critical, "warning": warning, "info": info},
        "bytes_by_kind": {"orphan_ledger": 3 * 1024**2} if warning else {},
        "total_findings": critical + warning + info,
        "inventory_counts": {"bk_ledgers": 10},
        "timings": {"collect": 1.0},
        "dropped_on_reverify": {"orphan_ledger": 1},
    }


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """Install a fake ``ledgerlens.audit.pipeline`` and Spark session; returns handles to both."""
    state = types.SimpleNamespace(
        pipeline=FakePipeline(summary()), spark=FakeSpark(), masters=[], preflights=[], znodes=[]
    )
    module = types.ModuleType("ledgerlens.audit.pipeline")
    module.run_request = lambda *a, **k: state.pipeline.run_request(*a, **k)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ledgerlens.audit.pipeline", module)
    import ledgerlens.audit

    monkeypatch.setattr(ledgerlens.audit, "pipeline", module, raising=False)

    def session(
        master: str, conf: dict[str, str] | None = None, *, znodes: int | None = None
    ) -> tuple[FakeSpark, bool]:
        state.masters.append(master)
        state.znodes.append(znodes)
        return state.spark, True

    def preflight(*a: object, **k: object) -> dict[str, object]:
        state.preflights.append((a, k))
        return {"stores": [], "znodes": 1234}

    monkeypatch.setattr(cli, "_spark_session", session)
    monkeypatch.setattr(cli, "_preflight", preflight)
    return state


def test_audit_builds_configs(
    fake: types.SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        [
            "audit",
            "--zookeeper",
            "zk1:2181,zk2:2181/pulsar",
            "--s3-endpoint",
            "http://127.0.0.1:5000",
            "--bucket",
            "offload",
            "--out",
            str(tmp_path),
            "--min-orphan-age",
            "2d",
            "--as-of",
            "2026-01-01T00:00:00Z",
            "--spark-master",
            "local[2]",
            "--ledgers-root",
            "/bk/ledgers",
            "--no-progress",
        ]
    )
    assert code == 0
    ((_spark, zk, s3, audit, out, progress),) = fake.pipeline.calls
    assert zk == ZooKeeperSource(hosts="zk1:2181,zk2:2181/pulsar", ledgers_root="/bk/ledgers")
    assert s3 == S3Source(bucket="offload", endpoint_url="http://127.0.0.1:5000")
    assert audit.min_orphan_age_s == 2 * 86400
    assert audit.as_of_ms == 1767225600000
    assert out == tmp_path and not progress.enabled  # --no-progress: a display that says nothing
    assert fake.masters == ["local[2]"] and fake.spark.stopped
    assert fake.znodes == [1234]  # what the preflight saw chooses the JVM's compilers
    printed = capsys.readouterr().out
    assert "0 critical, 1 warning, 0 info" not in printed  # default summary has no findings
    assert "findings.parquet" in printed and "summary.json" in printed


def test_offload_flags(fake: types.SimpleNamespace, tmp_path: Path) -> None:
    argv = ["audit", "--zookeeper", "h:1", "--bucket", "b", "--out", str(tmp_path)]
    assert cli.main([*argv, "--cluster-name", "east", "--deep-offload-check"]) == 0
    assert cli.main(argv) == 0
    assert fake.pipeline.options == [
        {"cluster_name": "east", "deep_offload_check": True},
        {"cluster_name": None, "deep_offload_check": False},
    ]


def test_audit_defaults(fake: types.SimpleNamespace, tmp_path: Path) -> None:
    assert cli.main(["audit", "--zookeeper", "127.0.0.1:2181", "--out", str(tmp_path)]) == 0
    ((_spark, zk, s3, audit, _out, progress),) = fake.pipeline.calls
    assert zk.ledgers_root == "/ledgers" and s3 is None
    assert audit.min_orphan_age_s == 24 * 3600 and progress.enabled
    assert fake.masters == ["local[*]"]


def test_summary_printed(
    fake: types.SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.pipeline.summary = summary(critical=2, warning=5, info=1)
    assert cli.main(["audit", "--zookeeper", "h:1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "8 findings: 2 critical, 5 warning, 1 info" in out
    assert "orphan_ledger" in out and "3.0 MiB" in out
    assert "dropped on re-verification: orphan_ledger 1" in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("ledgerlens: 2 critical, 5 warning, 1 info (8 findings")
    assert "worst: missing_ledger ledger 7" in last and "findings.parquet" in last


@pytest.mark.parametrize(
    ("counts", "fail_on", "code"),
    [
        ({}, "critical", 0),
        ({"warning": 3}, "critical", 0),
        ({"critical": 1}, "critical", 3),
        ({"warning": 1}, "warning", 3),
        ({"critical": 1}, "warning", 3),
        ({"info": 4}, "warning", 0),
        ({"critical": 1}, None, 0),
    ],
)
def test_fail_on_exit_codes(
    fake: types.SimpleNamespace, tmp_path: Path, counts: dict[str, int], fail_on: str | None, code: int
) -> None:
    fake.pipeline.summary = summary(**counts)
    argv = ["audit", "--zookeeper", "h:1", "--out", str(tmp_path)]
    if fail_on:
        argv += ["--fail-on", fail_on]
    assert cli.main(argv) == code


def test_ledgerlens_error_is_one_line_exit_2(
    fake: types.SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.pipeline.error = SourceError("zookeeper 127.0.0.1:1", "connection refused")
    assert cli.main(["audit", "--zookeeper", "127.0.0.1:1", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "ledgerlens audit: error: zookeeper 127.0.0.1:1: connection refused"
    assert all(line.startswith(("[", "ledgerlens audit: started ")) for line in err[:-1])  # progress
    assert fake.spark.stopped


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--min-orphan-age", "soon"], "duration 'soon'"),
        (["--min-orphan-age", "99999999999999999999d"], "out of range (at most 3650d)"),
        (["--retention-grace", "-1"], "duration '-1'"),
        (["--as-of", "99999999999999999999"], "out of range"),
        (["--as-of", "yesterday"], "time 'yesterday'"),
        (["--s3-endpoint", "http://x"], "s3 endpoint given without a bucket"),
    ],
)
def test_config_errors_exit_2_before_spark(
    fake: types.SimpleNamespace,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    assert cli.main(["audit", "--zookeeper", "h:1", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert fake.masters == [] and fake.pipeline.calls == []


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["audit", "--zookeeper", "h:1"],  # no --out
        ["audit", "--zookeeper", "h:1", "--out", "x", "--fail-on", "info"],
        ["sandbox-local", "restart", "--workdir", "x"],
        ["sandbox-local", "up"],
        ["nope"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert cli.main(["audit", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--fail-on" in out and "--min-orphan-age" in out


def test_report_parameters_and_calls(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledgerlens import report

    calls: dict[str, Any] = {}
    nb = tmp_path / "audit_ledgers.ipynb"
    nb.write_text("{}")

    def execute(
        notebook: Path,
        output: Path,
        parameters: dict[str, Any],
        *,
        kernel_name: str | None = None,
        progress: bool = False,
        kernel_stderr: Path | None = None,
    ) -> Path:
        calls["execute"] = (notebook, output, parameters, kernel_name)
        calls["kernel_stderr"] = kernel_stderr
        return output

    def to_html(notebook: Path, html: Path, *, exclude_input: bool = True, title: str = "") -> Path:
        calls["html"] = (notebook, html, exclude_input)
        calls["title"] = title
        return html

    recorded = {
        "summary": summary(),
        "context": {"cluster": "pulsar-east", "as_of_ms": 1_700_000_000_000},
    }
    monkeypatch.setattr(report, "execute_runbook", execute)
    monkeypatch.setattr(report, "to_html", to_html)
    monkeypatch.setattr(report, "read_recorded", lambda _nb, name="summary": recorded[name])
    monkeypatch.setattr(report, "relocate_notebook", lambda *a: None)
    monkeypatch.setattr(cli, "_preflight", lambda *a, **k: None)
    out = tmp_path / "rep"
    code = cli.main(
        [
            "report",
            "--zookeeper",
            "127.0.0.1:2181/c1",
            "--bucket",
            "b",
            "--out",
            str(out),
            "--notebook",
            str(nb),
            "--as-of",
            "1700000000000",
            "--kernel",
            "python3",
        ]
    )
    assert code == 0
    notebook, output, params, kernel = calls["execute"]
    staging = output.parent  # the run's private staging directory inside --out, published at the end
    assert staging.parent == out.resolve() and staging.name.startswith(".ledgerlens-staging-")
    assert notebook == nb and output.name == "audit_ledgers.ipynb" and kernel == "python3"
    # the kernel's own stderr (its noise when shut down mid-cell) is kept off the console
    assert calls["kernel_stderr"] is not None and calls["kernel_stderr"].name == cli.KERNEL_LOG
    assert not staging.exists()  # removed after publication
    assert params == {  # only what was given: the runbook resolves the rest like the CLI does
        "context": "",
        "sandbox": "",
        "zookeeper": "127.0.0.1:2181/c1",
        "s3_endpoint": "",
        "bucket": "b",
        "out_dir": str(staging),
        **{t: "" for t in inputs.THRESHOLDS},
        "as_of": "1700000000000",
        "spark_master": "",
        "ledgers_root": "",
        "cluster_name": "",
        "deep_offload_check": False,
        "interactive": False,
    }
    assert calls["html"] == (output, staging / "report.html", True)
    assert calls["title"] == "Pulsar storage audit: pulsar-east, 2023-11-14 22:13 UTC"
    printed = capsys.readouterr().out.strip().splitlines()
    assert "report.html" in printed[-2]
    assert (
        printed[-1]
        == f"ledgerlens: healthy, 0 findings (0 critical, 0 warning, 0 info); report: {out / 'report.html'}"
    )
    json.dumps(params)  # papermill parameters must be JSON-able


def test_report_missing_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        ["report", "--zookeeper", "h:1", "--out", str(tmp_path), "--notebook", str(tmp_path / "none.ipynb")]
    )
    assert code == 2
    assert "not found" in capsys.readouterr().err


def test_default_notebook_is_the_runbook() -> None:
    assert cli.DEFAULT_NOTEBOOK.name == "audit_ledgers.ipynb"
    assert cli.DEFAULT_NOTEBOOK.parent.name == "notebooks"


def test_sandbox_forwards(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[list[str]] = []
    module = types.ModuleType("ledgerlens_sandbox.local")
    module.main = lambda argv: seen.append(list(argv)) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ledgerlens_sandbox.local", module)
    import ledgerlens_sandbox

    monkeypatch.setattr(ledgerlens_sandbox, "local", module, raising=False)
    assert cli.main(["sandbox-local", "status", "--workdir", str(tmp_path)]) == 0
    assert seen == [["status", "--workdir", str(tmp_path)]]
    argv = [
        "sandbox-local",
        "seed",
        "--workdir",
        "w",
        "--scenario",
        "healthy",
        "--now-ms",
        "5",
        "--root",
        "/x",
    ]
    assert cli.main(argv) == 0
    assert seen[-1] == ["seed", "--workdir", "w", "--scenario", "healthy", "--root", "/x", "--now-ms", "5"]


def test_sandbox_drives_class_without_main(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class LocalSandbox:
        def __init__(self, workdir: Path) -> None:
            self.workdir = workdir

        def status(self) -> dict[str, Any]:
            return {"zookeeper": "127.0.0.1:2181", "workdir": str(self.workdir)}

    module = types.ModuleType("ledgerlens_sandbox.local")
    module.LocalSandbox = LocalSandbox  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ledgerlens_sandbox.local", module)
    import ledgerlens_sandbox

    monkeypatch.setattr(ledgerlens_sandbox, "local", module, raising=False)
    assert cli.main(["sandbox-local", "status", "--workdir", str(tmp_path)]) == 0
    assert json.loads(capsys.readouterr().out)["zookeeper"] == "127.0.0.1:2181"


def test_missing_zookeeper_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["audit", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert "--zookeeper" in err and "--sandbox" in err and len(err.strip().splitlines()) == 1


def test_sandbox_state_fills_the_inputs(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    (tmp_path / "state.json").write_text(
        json.dumps({"zookeeper_hosts": "127.0.0.1:2999", "s3_endpoint": "http://127.0.0.1:9", "bucket": "b1"})
    )
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    args = cli.build_parser().parse_args(["audit", "--sandbox", str(tmp_path), "--out", "x"])
    cli.apply_sandbox(args)
    assert (args.zookeeper, args.s3_endpoint, args.bucket) == ("127.0.0.1:2999", "http://127.0.0.1:9", "b1")
    import os

    assert os.environ["AWS_SECRET_ACCESS_KEY"] == cli.SANDBOX_AWS_DUMMY


def test_read_bookies_flag() -> None:
    from ledgerlens.cli import build_parser

    args = build_parser().parse_args(["audit", "--zookeeper", "zk:2181", "--out", "o", "--read-bookies"])
    assert args.read_bookies
    assert not build_parser().parse_args(["audit", "--zookeeper", "zk:2181", "--out", "o"]).read_bookies
