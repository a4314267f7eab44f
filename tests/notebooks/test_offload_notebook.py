"""The offload segments notebook: stored clean, executed by papermill on a planted cluster, offline HTML."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from generated import generated_cluster
from ledgerlens import report
from ledgerlens.offload.figures import byte_unit

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "offload_segments.ipynb"
NOW_MS = 1_795_000_000_000
PARAMETERS = (
    "zookeeper", "sandbox", "s3_endpoint", "bucket", "cluster_name", "deep_offload_check", "out_dir",
    "tenant", "namespace", "topic", "spark_master", "interactive",
)  # fmt: skip


def test_notebook_is_stored_without_outputs_and_documented() -> None:
    import papermill as pm

    nb = nbformat.read(str(NOTEBOOK), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert len([c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]) == 1
    params = pm.inspect_notebook(str(NOTEBOOK))
    for name in PARAMETERS:
        assert name in params and params[name]["help"], name
    assert not [p for p in params if any(w in p.lower() for w in ("secret", "token", "password", "key"))]


@pytest.fixture(scope="module")
def sandbox_dir(zookeeper: Any, s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated planted cluster, described by a sandbox ``state.json`` (as ``sandbox-local up``)."""
    cluster = generated_cluster(zookeeper, s3_server, "offload-nb", now_ms=NOW_MS)
    d = tmp_path_factory.mktemp("sandbox")
    state = {"zk_hosts": cluster["hosts"], "s3_endpoint": cluster["endpoint"], "bucket": cluster["bucket"]}
    (d / "state.json").write_text(json.dumps(state))
    return d


@pytest.mark.integration
@pytest.mark.spark
def test_notebook_runs_on_a_sandbox_and_exports_offline(sandbox_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "offload_segments.ipynb"
    params = {
        "sandbox": str(sandbox_dir),
        "out_dir": str(tmp_path / "run"),
        "as_of": str(NOW_MS),
        "spark_master": "local[2]",
        "max_topics": 3,
        "interactive": False,
    }
    report.execute_runbook(NOTEBOOK, out, params)
    totals = report.read_recorded(out, "offload")
    assert totals["objects"] > 0 and totals["object_bytes"] > 0
    assert totals["bytes_by_state"]["offloaded, deleted from BookKeeper"] > 0
    assert totals["orphan_bytes"] == 0  # as_of is fixed before the objects' real S3 times: none old enough
    assert totals["corrupt_bytes"] == 0
    assert totals["foreign_bytes"] > 0  # the generated cluster plants a foreign tenant's objects
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["cluster_name"] == "sandbox" and summary["offload_cluster_note"] is None
    assert summary["inventory_counts"]["offload_segments"] == summary["inventory_counts"]["offload_objects"]

    html = report.to_html(out, tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.count('class="plotly-graph-div"') == 1 + 3
    assert "Ledgers of " in html and "Offload bucket" in html
    assert report.external_scripts(html) == []

    # the executed notebook itself (what JupyterLab shows) requests nothing from the network: no
    # MathJax from a CDN with each figure, plotly.js inlined once, no label plotly would typeset
    outputs = _outputs(out)
    htmls = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    htmls = ["".join(h) if isinstance(h, list) else h for h in htmls]
    assert [s for h in htmls for s in report.external_scripts(h)] == []
    assert not [h for h in htmls if re.search(r"cdnjs\.|mathjax/|MathJax\.js|tex-svg", h)]
    assert sum(1 for h in htmls if len(h) > 1_000_000) <= 1  # plotly.js inlined once at most
    figures = [o["data"]["application/vnd.plotly.v1+json"] for o in outputs if _is_figure(o)]
    assert len(figures) == 1 + 3
    assert not [t for f in figures for t in _strings(f) if re.fullmatch(r"\$.*\$", t.strip(), re.S)]

    # the bucket's sizes read in one binary unit; its missing ledgers are marked, not zero-height bars
    bucket = figures[0]
    unit, factor = byte_unit(max(y for t in bucket["data"] if t["type"] == "bar" for y in t["customdata"]))
    assert {label.split()[-1] for label in bucket["layout"]["yaxis"]["ticktext"]} == {unit} and factor > 1
    bars = [t for t in bucket["data"] if t["type"] == "bar"]
    assert all(
        y * factor == pytest.approx(b) for t in bars for y, b in zip(t["y"], t["customdata"], strict=True)
    )
    missing = totals["ledgers_by_state"]["missing"]
    assert missing > 0  # the planted cluster lost ledgers (missing_ledger, missing_offload_object)
    marks = [t for t in bucket["data"] if t["type"] == "scatter"]
    assert (
        len(marks) == 1
        and marks[0]["x"] == ["missing"]
        and marks[0]["text"] == [f"missing: {missing} ledgers"]
    )


def _outputs(notebook: Path) -> list[dict[str, Any]]:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]


def _is_figure(output: dict[str, Any]) -> bool:
    return "application/vnd.plotly.v1+json" in output.get("data", {})


def _strings(value: Any) -> Iterator[str]:
    """Every string in a figure's JSON (titles, axis titles, tick labels, texts, names)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
