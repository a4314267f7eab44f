"""The offload segments notebook: stored clean, executed by papermill on a planted cluster, offline HTML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from generated import generated_cluster
from ledgerlens import report

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
