"""Reports, figures and explanations that every runbook and widget shares.

- ``explain``: one finding -> reason, next step (commands with names filled in), rule link.
- ``kinds``: every finding kind declared once (severity, rule module, explainer, rule section), one
  module per subject; the audit reads its kind tables and severities there.
- ``context``: what an audit looked at (cluster, stores, as-of, counts scanned, version, duration).
- ``html``: banner (the worst finding named), at a glance, context, findings with explanations in
  impact order, detail panel, compact table.
- ``figures``: plotly figures over the findings table; ``svg`` draws them for static reports.
- ``text``: units and words people read (binary bytes, durations, times, severities).
- ``runbook``: papermill execution, recorded results, the self-contained HTML export, secret checks.

The names below are the stable API notebooks use as ``report.<name>``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledgerlens.report.context import audit_context, report_title
    from ledgerlens.report.explanations import EXPLAINERS, Explanation, explain, rule_link
    from ledgerlens.report.html import (
        audited_html,
        banner_html,
        compared,
        context_html,
        error_html,
        evidence_html,
        finding_detail_html,
        findings_html,
        findings_table_html,
        glance_html,
        header_html,
        order_findings,
        rules_html,
        run_details_html,
        severity_rank,
        top_findings,
        wrap,
    )
    from ledgerlens.report.markdown import context_markdown, summary_markdown
    from ledgerlens.report.runbook import (
        INSTRUCTIONS_TAG,
        RECORD_KEY,
        ReportError,
        SecretLeakError,
        check_no_secrets,
        execute_runbook,
        external_scripts,
        live_kernel,
        read_recorded,
        record,
        redact_notebook_file,
        relocate_notebook,
        secret_values,
        to_html,
    )

# name -> the module that defines it: loaded on first use, so that a command importing one module of
# this package (``ledgerlens.report.text`` for the console) does not load pandas and plotly
_EXPORTS: dict[str, str] = {
    "EXPLAINERS": "explanations",
    "Explanation": "explanations",
    "INSTRUCTIONS_TAG": "runbook",
    "RECORD_KEY": "runbook",
    "ReportError": "runbook",
    "SecretLeakError": "runbook",
    "audit_context": "context",
    "audited_html": "html",
    "banner_html": "html",
    "compared": "html",
    "check_no_secrets": "runbook",
    "context_html": "html",
    "context_markdown": "markdown",
    "error_html": "html",
    "evidence_html": "html",
    "execute_runbook": "runbook",
    "explain": "explanations",
    "external_scripts": "runbook",
    "finding_detail_html": "html",
    "findings_html": "html",
    "findings_table_html": "html",
    "glance_html": "html",
    "header_html": "html",
    "live_kernel": "runbook",
    "read_recorded": "runbook",
    "record": "runbook",
    "redact_notebook_file": "runbook",
    "relocate_notebook": "runbook",
    "report_title": "context",
    "rule_link": "explanations",
    "order_findings": "html",
    "rules_html": "html",
    "run_details_html": "html",
    "secret_values": "runbook",
    "severity_rank": "html",
    "summary_markdown": "markdown",
    "to_html": "runbook",
    "top_findings": "html",
    "wrap": "html",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "EXPLAINERS",
    "INSTRUCTIONS_TAG",
    "RECORD_KEY",
    "Explanation",
    "ReportError",
    "SecretLeakError",
    "audit_context",
    "audited_html",
    "banner_html",
    "check_no_secrets",
    "compared",
    "context_html",
    "context_markdown",
    "error_html",
    "evidence_html",
    "execute_runbook",
    "explain",
    "external_scripts",
    "finding_detail_html",
    "findings_html",
    "findings_table_html",
    "glance_html",
    "header_html",
    "live_kernel",
    "order_findings",
    "read_recorded",
    "record",
    "redact_notebook_file",
    "relocate_notebook",
    "report_title",
    "rule_link",
    "rules_html",
    "run_details_html",
    "secret_values",
    "severity_rank",
    "summary_markdown",
    "to_html",
    "top_findings",
    "wrap",
]
