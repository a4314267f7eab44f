"""Run the audit runbook headless and turn it into a shareable report.

- ``execute_runbook``: papermill executes a parameterized notebook into an output notebook.
- ``read_recorded``: read back a result the notebook recorded (``record``) in its outputs.
- ``to_html``: nbconvert the executed notebook into one self-contained HTML file.
- ``findings_table_html`` / ``top_findings`` / ``error_html``: HTML for notebooks and widgets,
  without ipywidgets (headless runs need no UI).

Credentials never appear in a report: the executed notebook and the HTML pass through
``ledgerlens.redact.redact`` before they are written (URL userinfo, tokens, keys, the values of
secret environment variables); ``check_no_secrets`` refuses runbook parameters that hold a secret.
"""

from __future__ import annotations

import html as _html
import json
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ledgerlens.config import AuditConfig, S3Source, ZooKeeperSource
from ledgerlens.errors import LedgerLensError
from ledgerlens.figures import SEVERITY_COLORS, SEVERITY_ORDER, human_bytes
from ledgerlens.redact import leaked_names, redact, redact_html, redact_notebook
from ledgerlens.redact import secret_values as secret_values

if TYPE_CHECKING:
    from ledgerlens.sources.stores import Stores

RECORD_KEY = "ledgerlens"
"""Output metadata key that marks a recorded result: ``{"ledgerlens": <name>}``."""

TABLE_COLUMNS = (
    "severity",
    "kind",
    "component",
    "namespace",
    "managed_ledger",
    "ledger_id",
    "cursor",
    "object_key",
    "bytes",
    "age_seconds",
    "action",
)


class ReportError(LedgerLensError):
    """The runbook could not be executed, read back or converted."""


class SecretLeakError(ReportError):
    """A secret's value appears in a notebook or report. The message names the variable, never the value."""


# --- HTML for notebooks and widgets -----------------------------------------------------------------


def severity_rank(severity: pd.Series) -> pd.Series:
    """critical -> 0, warning -> 1, info -> 2, anything else -> 3."""
    ranks = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return severity.map(ranks).fillna(len(ranks)).astype("int64")


def top_findings(df: pd.DataFrame, n: int = 50) -> pd.DataFrame:
    """The ``n`` most pressing findings: by severity (critical first), then bytes, largest first."""
    if df.empty:
        return df
    key = pd.DataFrame(
        {"rank": severity_rank(df["severity"]), "bytes": pd.to_numeric(df["bytes"], errors="coerce")}
    )
    order = key.sort_values(["rank", "bytes"], ascending=[True, False], na_position="last", kind="stable")
    return df.loc[order.index[:n]]


def _cell(column: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NA:
        return ""
    if column == "bytes":
        return f'<span title="{int(value)} bytes">{_html.escape(human_bytes(value))}</span>'
    if column == "age_seconds":
        seconds = int(value)
        text = f"{seconds / 86400:.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"
        return f'<span title="{seconds} s">{text}</span>'
    if column == "ledger_id":
        return str(int(value))
    if column == "severity":
        color = SEVERITY_COLORS.get(str(value), "#2d3436")
        return f'<b style="color:{color}">{_html.escape(str(value))}</b>'
    return _html.escape(str(value))


_HEADERS = {
    "age_seconds": "age",
    "managed_ledger": "managed ledger",
    "ledger_id": "ledger",
    "object_key": "object key",
}


def findings_table_html(
    df: pd.DataFrame, *, columns: Iterable[str] = TABLE_COLUMNS, max_rows: int = 200, caption: str = ""
) -> str:
    """An HTML table of findings (escaped; bytes and ages human-readable), at most ``max_rows`` rows."""
    cols = [c for c in columns if c in df.columns]
    head = "".join(f"<th>{_html.escape(_HEADERS.get(c, c))}</th>" for c in cols)
    shown = df.head(max_rows)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(c, v)}</td>" for c, v in zip(cols, row, strict=True)) + "</tr>"
        for row in shown[cols].itertuples(index=False, name=None)
    )
    if df.empty:
        body = f'<tr><td colspan="{len(cols)}"><i>no findings</i></td></tr>'
    note = ""
    if len(df) > max_rows:
        note = f"<p><i>showing {max_rows} of {len(df)} findings</i></p>"
    cap = f"<caption>{_html.escape(caption)}</caption>" if caption else ""
    style = "border-collapse:collapse;font-size:12px;font-family:monospace;white-space:nowrap"
    return (
        f'<div style="max-height:480px;overflow:auto"><table class="ledgerlens-findings" style="{style}">'
        f"{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}"
    )


def summary_markdown(summary: Mapping[str, Any]) -> str:
    """A short markdown summary of an audit run's ``summary`` dict."""
    total = summary.get("total_findings", 0)
    sev = summary.get("counts_by_severity", {}) or {}
    lines = [f"**{total} findings**: " + ", ".join(f"{sev.get(s, 0)} {s}" for s in SEVERITY_ORDER)]
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
    timings = summary.get("timings") or {}
    if timings:
        lines += ["", "Timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items())]
    lines += context_markdown(summary.get("context"))
    return "\n".join(lines)


def context_markdown(context: Mapping[str, Any] | None) -> list[str]:
    """Lines of markdown: the context's name and every resolved setting with its origin.

    ``context`` is ``summary["context"]`` (``ledgerlens.contexts.Settings.public()``, redacted).
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


def error_html(error: BaseException) -> str:
    """A readable HTML block for an error shown in a notebook (no traceback)."""
    return (
        '<div style="border-left:4px solid #c0392b;padding:6px 10px;background:#fdf2f2">'
        f"<b>{_html.escape(type(error).__name__)}</b>: {_html.escape(str(error))}</div>"
    )


# --- inputs shared by the CLI and the runbook ----------------------------------------------------------


def runbook_settings(
    zookeeper: str = "",
    *,
    context: str = "",
    s3_endpoint: str = "",
    bucket: str = "",
    min_orphan_age: str = "",
    ledgers_root: str = "",
    retention_grace: str = "",
    source: str = "",
    zk_data_dir: str = "",
    zk_until: str = "",
    bookkeeper_metadata: str = "",
    pulsar_metadata: str = "",
    deleted_tenants: str = "",
) -> Any:
    """``ledgerlens.contexts.Settings`` of the runbook parameters (strings, as typed).

    Resolved by ``ledgerlens.contexts.resolve``: an empty parameter is "not given" and falls back
    to the environment, then the ``context``, then the built-in default. ``pulsar_metadata`` and
    ``deleted_tenants`` are space-separated.
    """
    from ledgerlens import contexts

    return contexts.resolve(
        context or None,
        flags={
            "zookeeper": zookeeper,
            "s3_endpoint": s3_endpoint,
            "bucket": bucket,
            "min_orphan_age": min_orphan_age,
            "ledgers_root": ledgers_root,
            "retention_grace": retention_grace,
            "source": source,
            "zk_data_dir": zk_data_dir,
            "zk_until": zk_until,
            "bookkeeper_metadata": bookkeeper_metadata,
            "pulsar_metadata": pulsar_metadata,
            "deleted_tenant": deleted_tenants.replace(",", " ").split(),
        },
        flag_layer="parameter",
    )


def audit_inputs(
    zookeeper: str = "",
    *,
    as_of: str = "",
    **params: str,
) -> tuple[ZooKeeperSource | None, S3Source | None, AuditConfig]:
    """Sources and audit settings from the runbook parameters / CLI options (:func:`runbook_settings`).

    No bucket: no S3 inventory (offload rules do not run). Empty ``as_of``: now. No ZooKeeperSource
    when the metadata stores are named otherwise (:func:`audit_stores`).
    """
    return runbook_settings(zookeeper, **params).audit_inputs(as_of)  # type: ignore[no-any-return]


def audit_stores(zookeeper: str = "", **params: str) -> Stores:
    """The metadata stores (``ledgerlens.sources.stores.Stores``) of the runbook parameters."""
    return runbook_settings(zookeeper, **params).stores()  # type: ignore[no-any-return]


def live_kernel() -> bool:
    """True inside an IPython kernel that is not driven by papermill (widgets have a front end)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return True
    return b"papermill" not in parent


# --- recording results in the output notebook ---------------------------------------------------------


def record(name: str, value: Any) -> None:
    """Display ``value`` (JSON-able) as an ``application/json`` output tagged ``{"ledgerlens": name}``.

    Called from a notebook; papermill keeps the output in the executed notebook, where
    ``read_recorded`` finds it again.
    """
    from IPython.display import display

    data = json.loads(json.dumps(value, default=str))
    display({"application/json": data}, raw=True, metadata={"application/json": {RECORD_KEY: name}})


def read_recorded(nb_path: str | Path, name: str = "summary") -> Any:
    """The value a notebook recorded under ``name`` (the last one, when recorded more than once)."""
    import nbformat

    nb = nbformat.read(str(nb_path), as_version=4)
    found: list[Any] = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            meta = output.get("metadata", {})
            tag = (meta.get("application/json") or {}).get(RECORD_KEY, meta.get(RECORD_KEY))
            if tag == name and "application/json" in data:
                value = data["application/json"]
                found.append(json.loads(value) if isinstance(value, str) else value)
    if not found:
        raise ReportError(f"{nb_path}: no output recorded as {name!r} (did the notebook run to the end?)")
    return found[-1]


# --- secrets ---------------------------------------------------------------------------------------


def check_no_secrets(text: str, where: str, env: Mapping[str, str] | None = None) -> None:
    """Raise ``SecretLeakError`` naming the variable (never its value) if a secret appears in ``text``."""
    leaked = leaked_names(text, env)
    if leaked:
        raise SecretLeakError(
            f"{where}: contains the value of environment variable(s) {', '.join(leaked)}; "
            "refusing to publish it (credentials must come from the environment, never be printed)"
        )
    if redact(text, env) != text:
        raise SecretLeakError(
            f"{where}: contains a credential (URL userinfo, token, key or password); "
            "credentials come from the environment or config files, never parameters"
        )


def redact_notebook_file(path: str | Path) -> Path:
    """Rewrite the notebook ``path`` with every credential redacted (``ledgerlens.redact``)."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    clean = redact_notebook(nb)
    if clean != nb:
        path.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# --- papermill and nbconvert -----------------------------------------------------------------------


def execute_runbook(
    notebook: str | Path,
    output: str | Path,
    parameters: Mapping[str, Any],
    *,
    kernel_name: str | None = None,
    cwd: str | Path | None = None,
) -> Path:
    """Execute ``notebook`` with papermill into ``output``; returns ``output``.

    ``kernel_name`` defaults to the notebook's own kernelspec (``python3``: the running environment's
    ipykernel). A failing cell raises ``ReportError`` naming the cell and the error; the partly
    executed notebook is kept at ``output`` for inspection.
    """
    import papermill as pm
    from papermill.exceptions import PapermillExecutionError

    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    check_no_secrets(json.dumps(dict(parameters), default=str), "runbook parameters")
    try:
        pm.execute_notebook(
            str(notebook),
            str(output),
            parameters=dict(parameters),
            kernel_name=kernel_name,
            progress_bar=False,
            cwd=str(cwd) if cwd is not None else None,
        )
    except PapermillExecutionError as e:
        if output.is_file():
            redact_notebook_file(output)
        first = (str(e.evalue).strip().splitlines() or [""])[0]
        raise ReportError(
            f"{notebook}: cell {e.exec_count} failed: {e.ename}: {first} (details in {output})"
        ) from e
    return redact_notebook_file(output)


# Blocks of nbconvert's ``lab`` template that load scripts from public CDNs: the report must open
# offline (figures embed plotly.js themselves) and must not phone home.
_OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
"""
_EXTERNAL_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//[^>]*>\s*</script>""", re.I)


def external_scripts(html: str) -> list[str]:
    """Every ``<script src=...>`` tag that loads from the network."""
    return _EXTERNAL_SCRIPT.findall(html)


def to_html(
    notebook: str | Path,
    html: str | Path,
    *,
    exclude_input: bool = True,
    keep_stderr: bool = False,
    title: str = "",
) -> Path:
    """Convert an executed notebook into one self-contained HTML file; returns ``html``.

    Figures must have been rendered with plotly's ``notebook`` renderer (plotly.js inlined once).
    Scripts from CDNs (require.js, MathJax, mermaid, widget manager) are left out, widget state is
    dropped (widgets need a live kernel), code cells are hidden unless ``exclude_input=False``, and
    stderr streams (Spark's log and progress lines) are left out unless ``keep_stderr=True`` (the
    executed notebook keeps everything). Credentials are redacted (``ledgerlens.redact``).
    """
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    notebook, html = Path(notebook), Path(html)
    text = json.dumps(redact_notebook(json.loads(notebook.read_text(encoding="utf-8"))))
    nb = nbformat.reads(text, as_version=4)
    nb.metadata.pop("widgets", None)
    if not keep_stderr:
        for cell in nb.cells:
            if "outputs" in cell:
                cell.outputs = [
                    o
                    for o in cell.outputs
                    if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
                ]
    if title:
        nb.metadata["title"] = title
    exporter = HTMLExporter(
        extra_loaders=[DictLoader({"ledgerlens_report.html.j2": _OFFLINE_TEMPLATE})],
        template_file="ledgerlens_report.html.j2",
        exclude_input=exclude_input,
        exclude_input_prompt=exclude_input,
        exclude_output_prompt=exclude_input,
    )
    with warnings.catch_warnings():  # recorded application/json outputs have no HTML form, on purpose
        warnings.filterwarnings("ignore", message=".*is not able to be represented", category=UserWarning)
        body, _resources = exporter.from_notebook_node(
            nb, resources={"metadata": {"name": title or notebook.stem}}
        )
    body = redact_html(_EXTERNAL_SCRIPT.sub("", body))
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(body, encoding="utf-8")
    return html
