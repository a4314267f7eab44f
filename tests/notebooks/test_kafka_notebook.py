"""The Kafka runbook: stored clean, executed by papermill on a planted dump and local tiered storage."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import nbformat
import pytest

from ledgerlens import report
from ledgerlens.formats.kafka_remote_keys import segment_keys
from ledgerlens.formats.kafka_remote_log import (
    SegmentRecord,
    SegmentUpdateRecord,
    TopicIdPartition,
    encode_record,
    uuid_from_bytes,
)
from ledgerlens.kafka.replay import MetadataRecord
from ledgerlens.sources.kafka_metadata import write_dump

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "notebooks" / "kafka_remote_segments.ipynb"


def test_kafka_runbook_is_stored_without_outputs() -> None:
    import papermill as pm

    nb = nbformat.read(str(RUNBOOK), as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    params = pm.inspect_notebook(str(RUNBOOK))
    for name in ("bootstrap_servers", "bucket", "remote_dir", "metadata_dump", "out_dir", "interactive"):
        assert params[name]["help"], name


def test_kafka_runbook_runs_headless(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    old = now - 2 * 86_400_000
    tip = TopicIdPartition("clicks", uuid_from_bytes(b"\x07" * 16), 0)
    recs, root = [], tmp_path / "remote" / "kafka-tiered-storage"
    for i in range(4):
        sid = uuid_from_bytes(bytes([i + 1]) * 16)
        recs.append(SegmentRecord(tip, sid, i * 100, i * 100 + 99, 1, old, old, ((0, i * 100),), 10, None,
                                  "COPY_SEGMENT_STARTED"))  # fmt: skip
        if i < 3:
            recs.append(SegmentUpdateRecord(tip, sid, 1, old, None, "COPY_SEGMENT_FINISHED"))
            for key in segment_keys("local", tip.topic, tip.topic_id, 0, i * 100, sid).values():
                (root / key).parent.mkdir(parents=True, exist_ok=True)
                (root / key).write_bytes(b"z" * 10)
    dump = tmp_path / "rlm.jsonl"
    write_dump(dump, [MetadataRecord(0, n, old, encode_record(r)) for n, r in enumerate(recs)])
    out = report.execute_runbook(
        RUNBOOK,
        tmp_path / "out" / "kafka_remote_segments.ipynb",
        {
            "bootstrap_servers": "",
            "metadata_dump": str(dump),
            "remote_dir": str(tmp_path / "remote"),
            "out_dir": str(tmp_path / "audit"),
            "stuck_after": "1h",
            "spark_master": "local[1]",
            "interactive": False,
        },
        kernel_name="python3",
    )
    summary = report.read_recorded(out, "summary")
    assert summary["counts_by_kind"] == {"remote_segment_stuck_copy": 1}
    timeline = report.read_recorded(out, "timeline")
    bars = {"COPY_SEGMENT_FINISHED": 3, "COPY_SEGMENT_STARTED": 1}
    assert timeline == {"bars_by_state": bars, "segments": 4}
    # figures inline, nothing fetched: no script from a CDN, no MathJax (an error offline)
    nb = json.loads(Path(out).read_text())
    htmls = [
        "".join(o.get("data", {}).get("text/html", "")) for c in nb["cells"] for o in c.get("outputs", [])
    ]
    assert not [h for h in htmls if report.external_scripts(h)]
    assert not [h for h in htmls if re.search(r"cdnjs\.|mathjax/|MathJax\.js|tex-svg", h)]
