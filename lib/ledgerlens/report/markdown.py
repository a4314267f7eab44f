"""Markdown summaries of an audit run, for notebook cells that show text rather than HTML views.

- ``summary_markdown``: the counts by severity and kind, what re-verification dropped, the context.
- ``context_markdown``: the context's name and every resolved setting with its origin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledgerlens.report.text import SEVERITY_ORDER, human_bytes


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """A short markdown summary of an audit run's ``summary`` dict."""
    total = summary.get("total_findings", 0)
    sev = summary.get("counts_by_severity", {}) or {}
    lines = [f"**{total} findings**: " + ", ".join(f"{sev.get(s, 0)} {s}" for s in SEVERITY_ORDER)]
    suspicion = summary.get("suspected_wrong_root")
    if suspicion:
        lines = [f"**Suspected wrong root**: {suspicion.get('message', '')}", "", *lines]
    kinds = summary.get("counts_by_kind", {}) or {}
    bytes_by_kind = summary.get("bytes_by_kind", {}) or {}
    if kinds:
        lines += ["", "| kind | findings | bytes |", "|---|---:|---:|"]
        for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"| `{kind}` | {n} | {human_bytes(bytes_by_kind.get(kind) or 0)} |")
    dropped = {k: v for k, v in (summary.get("dropped_on_reverify") or {}).items() if v}
    if dropped:
        lines += [
            "",
            "Dropped on re-verification: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())),
        ]
    lines += context_markdown(summary.get("context"))
    return "\n".join(lines)


def context_markdown(context: Mapping[str, Any] | None) -> list[str]:
    """Lines of markdown: the context's name and every resolved setting with its origin.

    ``context`` is ``summary["context"]`` (``ledgerlens.settings.contexts.Settings.public()``, redacted).
    """
    if not context:
        return []
    name = context.get("name") or "(none: defaults, environment and parameters)"
    lines = ["", f"Context: **{name}**" + (f" from `{context['file']}`" if context.get("file") else "")]
    settings = context.get("settings") or {}
    if settings:
        lines += ["", "| setting | value | origin |", "|---|---|---|"]
        for key, v in settings.items():
            value = str(v.get("value", "")).replace("|", "\\|")
            lines.append(
                f"| `{key}` | `{value}` | {v.get('origin', '')} |"
                if value
                else f"| `{key}` | | {v.get('origin', '')} |"
            )
    return lines
