"""An audit's results as Prometheus metrics, for node_exporter's textfile collector.

``write_textfile(path, summary, cluster=...)`` writes findings and bytes by kind and severity, the
findings new and resolved since the previous run by severity, rows
scanned per table, the duration, the as-of time and the last success time in the Prometheus text
exposition format, atomically (a temporary file renamed over ``path``, so the collector never reads
half a file). ``write_failure(path, cluster=...)`` records a failed run and keeps the previous last
success time, so an alert on ``time() - ledgerlens_audit_last_success_timestamp_seconds`` fires
when audits stop succeeding.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ledgerlens.report.text import SEVERITY_ORDER
from ledgerlens.runtime.outdir import write_atomic

PREFIX = "ledgerlens_audit"
_LAST_SUCCESS = f"{PREFIX}_last_success_timestamp_seconds"


def _label_value(v: object) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: object) -> str:
    inner = ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def _metric(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {help_text}")
    lines.append(f"# TYPE {name} {kind}")


def _num(v: float | int) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def previous_success(path: str | Path, cluster: str) -> float | None:
    """The last success time recorded in an existing textfile for ``cluster`` (None if none)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    pattern = re.compile(rf"^{_LAST_SUCCESS}{re.escape(_labels(cluster=cluster))} (\S+)$", re.M)
    m = pattern.search(text)
    return float(m.group(1)) if m else None


def _changes(lines: list[str], summary: Mapping[str, Any], c: Mapping[str, str]) -> None:
    """New and resolved findings since the previous run, per severity (0 included), when the
    summary compared with one (``ledgerlens.audit.history``; with no previous run every finding is new)."""
    for key, name, help_text in (
        ("new_by_severity", "new_findings", "Findings of the last audit the previous run did not report."),
        ("resolved_by_severity", "resolved_findings", "Findings of the previous run no longer reported."),
    ):
        if key not in summary:
            continue
        counts = summary.get(key) or {}
        _metric(lines, f"{PREFIX}_{name}", "gauge", help_text)
        for s in SEVERITY_ORDER:
            lines.append(f"{PREFIX}_{name}{_labels(**c, severity=s)} {int(counts.get(s, 0) or 0)}")


def _disk_usage(lines: list[str], summary: Mapping[str, Any], c: Mapping[str, str]) -> None:
    """``ledgerlens_bookkeeper_bytes{cluster,state}``: BookKeeper bytes by state (``audit.disk``),
    every state of the summary's ``disk_usage`` (they add up to the inventory's total)."""
    usage = summary.get("disk_usage")
    if not isinstance(usage, Mapping):
        return
    name = "ledgerlens_bookkeeper_bytes"
    copies = "times its write quorum" if usage.get("replicated") else "one copy"
    _metric(lines, name, "gauge", f"BookKeeper ledger bytes ({copies}) by state at the last audit.")
    for state, size in (usage.get("by_state") or {}).items():
        lines.append(f"{name}{_labels(**c, state=state)} {int(size or 0)}")


def render(
    summary: Mapping[str, Any] | None,
    *,
    cluster: str,
    success: bool,
    last_success_s: float | None,
    now_s: float | None = None,
) -> str:
    """The text exposition of one audit (``summary=None``: a failed run, no finding metrics)."""
    c = {"cluster": cluster}
    lines: list[str] = []
    _metric(lines, f"{PREFIX}_success", "gauge", "1 if the last audit ran to the end, else 0.")
    lines.append(f"{PREFIX}_success{_labels(**c)} {1 if success else 0}")
    _metric(lines, f"{PREFIX}_last_run_timestamp_seconds", "gauge", "When the last audit ended.")
    lines.append(f"{PREFIX}_last_run_timestamp_seconds{_labels(**c)} {_num(round(now_s or time.time(), 3))}")
    if last_success_s is not None:
        _metric(lines, _LAST_SUCCESS, "gauge", "When an audit last ran to the end.")
        lines.append(f"{_LAST_SUCCESS}{_labels(**c)} {_num(round(last_success_s, 3))}")
    if summary is not None:
        cells = summary.get("by_kind_severity") or []
        _metric(lines, f"{PREFIX}_findings", "gauge", "Findings of the last audit by kind and severity.")
        for cell in cells:
            labels = _labels(**c, kind=cell["kind"], severity=cell["severity"])
            lines.append(f"{PREFIX}_findings{labels} {int(cell['count'])}")
        _metric(
            lines,
            f"{PREFIX}_finding_bytes",
            "gauge",
            "Bytes of the last audit's findings by kind and severity.",
        )
        for cell in cells:
            lines.append(
                f"{PREFIX}_finding_bytes{_labels(**c, kind=cell['kind'], severity=cell['severity'])} "
                f"{int(cell['bytes'])}"
            )
        _metric(lines, f"{PREFIX}_findings_by_severity", "gauge", "Findings of the last audit by severity.")
        sev = summary.get("counts_by_severity") or {}
        for s in SEVERITY_ORDER:
            lines.append(f"{PREFIX}_findings_by_severity{_labels(**c, severity=s)} {int(sev.get(s, 0) or 0)}")
        _changes(lines, summary, c)
        _disk_usage(lines, summary, c)
        counts = summary.get("inventory_counts") or {}
        _metric(lines, f"{PREFIX}_scanned_rows", "gauge", "Inventory rows the last audit scanned, per table.")
        for table in sorted(k for k in counts if "." not in k):
            lines.append(f"{PREFIX}_scanned_rows{_labels(**c, table=table)} {int(counts[table])}")
        _offload_verification(lines, summary, c)
        timings = summary.get("timings") or {}
        duration = timings.get("total") or sum(
            float(timings.get(k) or 0) for k in ("collect", "audit", "reverify", "write")
        )
        _metric(lines, f"{PREFIX}_duration_seconds", "gauge", "How long the last audit took.")
        lines.append(f"{PREFIX}_duration_seconds{_labels(**c)} {_num(round(float(duration), 3))}")
        if summary.get("as_of_ms"):
            _metric(lines, f"{PREFIX}_as_of_timestamp_seconds", "gauge", "The 'now' the last audit used.")
            lines.append(
                f"{PREFIX}_as_of_timestamp_seconds{_labels(**c)} {_num(int(summary['as_of_ms']) / 1000)}"
            )
    return "\n".join(lines) + "\n"


def _offload_verification(lines: list[str], summary: Mapping[str, Any], c: Mapping[str, str]) -> None:
    """Offload objects verified, reused from the previous run or not verified (request budget), and
    the GETs spent: only when the bucket was scanned."""
    checked = summary.get("offload_verification")
    if not summary.get("s3_scanned") or not isinstance(checked, Mapping):
        return
    name = f"{PREFIX}_offload_objects"
    _metric(lines, name, "gauge", "Offload objects of the last audit: verified, reused, not_verified.")
    for state in ("verified", "reused", "not_verified"):
        lines.append(f"{name}{_labels(**c, state=state)} {int(checked.get(state) or 0)}")
    _metric(lines, f"{PREFIX}_offload_gets", "gauge", "GETs the last audit's offload verification issued.")
    lines.append(f"{PREFIX}_offload_gets{_labels(**c)} {int(checked.get('gets') or 0)}")


def write_textfile(path: str | Path, summary: Mapping[str, Any], *, cluster: str) -> Path:
    """Write a successful audit's metrics to ``path`` (atomically); returns ``path``."""
    now = time.time()
    p = Path(path)
    write_atomic(p, render(summary, cluster=cluster, success=True, last_success_s=now, now_s=now))
    return p


def write_failure(path: str | Path, *, cluster: str) -> Path:
    """Record a failed audit in ``path``, keeping the previous last-success time."""
    p = Path(path)
    write_atomic(p, render(None, cluster=cluster, success=False, last_success_s=previous_success(p, cluster)))
    return p
