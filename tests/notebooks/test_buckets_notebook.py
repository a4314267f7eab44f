"""The delayed-buckets runbook on a cluster whose bookies are down: one line says so, and nothing else.

A generated cluster (real ZooKeeper) whose delayed-index buckets live on bookies that are not running:
the runbook reads the bucket properties and the snapshot ledgers' metadata, every bookie refuses the
connection, and the on-call person sees one line naming the bookies and what to do. No empty
figures, no table repeating the same connection error, no MathJax fetched.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens import report
from ledgerlens_sandbox.cluster import BOOKIES

pytestmark = [pytest.mark.notebooks, pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "delayed_buckets.ipynb"
NOW_MS = 1_795_000_000_000


@pytest.fixture(scope="module")
def sandbox_dir(zookeeper: Any, s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated planted cluster (delayed-index buckets on the bookies ``BOOKIES``), as a sandbox."""
    cluster = generated_cluster(zookeeper, s3_server, "buckets-nb", now_ms=NOW_MS)
    d = tmp_path_factory.mktemp("sandbox")
    state = {"zk_hosts": cluster["hosts"], "s3_endpoint": cluster["endpoint"], "bucket": cluster["bucket"]}
    (d / "state.json").write_text(json.dumps(state))
    return d


def _refuses(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _texts(notebook: Path) -> tuple[list[str], list[dict[str, Any]]]:
    """What a reader sees of each output (Markdown, else HTML, else plain text, or a stream), and
    the outputs themselves."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    texts = []
    for o in outputs:
        if o["output_type"] == "stream":
            texts.append("".join(o["text"]))
            continue
        data = o.get("data", {})
        for mime in ("text/markdown", "text/html", "text/plain"):
            if mime in data:
                value = data[mime]
                texts.append("".join(value) if isinstance(value, list) else value)
                break
    return texts, outputs


def test_bookies_down_is_one_line_naming_them(sandbox_dir: Path, tmp_path: Path) -> None:
    ensemble = list(BOOKIES[:2])  # the snapshot ledgers' ensemble in the generated cluster
    assert all(_refuses(b) for b in ensemble), "a process listens on the generated cluster's bookie ports"
    out = report.execute_runbook(
        NOTEBOOK,
        tmp_path / "delayed_buckets.ipynb",
        {
            "sandbox": str(sandbox_dir),
            "out_dir": str(tmp_path / "out"),
            "now_ms": NOW_MS,
            "spark_master": "local[2]",
            "interactive": False,
        },
    )
    reads = report.read_recorded(out, "bucket_reads")
    assert reads["bookies_down"] and reads["read"] == 0 and reads["unreadable"] >= 2
    assert reads["unreachable"] == ensemble
    assert report.read_recorded(out, "buckets") == []

    texts, outputs = _texts(out)
    lines = [line for t in texts for line in t.splitlines() if line.strip()]
    named = [line for line in lines if any(b in line for b in ensemble)]
    assert len(named) == 1, named  # exactly one line names the bookies ...
    line = named[0]
    assert all(b in line for b in ensemble) and "Bookies unreachable" in line
    assert "Start the bookies" in line  # ... and says what to do
    everything = "\n".join(texts).lower()
    assert everything.count("connection refused") == 1  # no wall of the same error
    assert "traceback" not in everything and "warn" not in everything
    # no figures at all (no empty ones), no data frame of unreadable buckets
    assert not [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert not [t for t in texts if "plotly-graph-div" in t or "<table" in t]

    html = report.to_html(out, tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Bookies unreachable" in html and html.lower().count("connection refused") == 1
    assert report.external_scripts(html) == [] and not re.search(r"mathjax/|MathJax\.js|tex-svg", html)
