"""HTML views of an audit for reports, notebooks and widgets (no ipywidgets: headless runs need no UI).

- ``banner_html``: the answer first: healthy, N critical, N warning, or nothing scanned.
- ``context_html``: what was audited (cluster, stores, as-of, counts scanned, version, duration).
- ``findings_html``: every finding with its reason, path, next step, evidence and rule, critical
  first, grouped by severity and kind.
- ``finding_detail_html``: one finding, all fields (the explorer's detail panel).
- ``findings_table_html``: a compact, wrapping table (no inner scrollbars).
- ``rules_html``: the rules' sections of ``docs/audit-rules.md`` for the kinds shown.

Everything is escaped; styles are scoped under ``.ll`` so they win over JupyterLab's output styles
(which right-align table cells) and never leak into the page.
"""

from __future__ import annotations

import html as _html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ledgerlens.report.context import TABLE_LABELS
from ledgerlens.report.explanations import (
    AuditedWhere,
    Explanation,
    explain,
    parse_evidence,
    rule_sections,
)
from ledgerlens.report.text import (
    SEVERITY_COLORS,
    SEVERITY_ORDER,
    human_bytes,
    human_duration,
    human_time,
    impact_tier,
    is_missing,
    plural,
)

STYLE = """<style>
.ll{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:14px;line-height:1.45;
  color:#1f2933;max-width:100%;box-sizing:border-box;overflow-wrap:anywhere}
.ll *{box-sizing:border-box}
.ll h1{font-size:24px;margin:4px 0 8px}
.ll h2{font-size:19px;margin:22px 0 8px;border-bottom:1px solid #d9dee3;padding-bottom:3px}
.ll h3{font-size:16px;margin:16px 0 6px}
.ll .ll-banner{padding:12px 16px;border-radius:6px;font-size:18px;font-weight:600;margin:6px 0 10px;
  color:#fff}
.ll .ll-banner small{display:block;font-size:14px;font-weight:400;margin-top:2px}
.ll .ll-healthy{background:#1e8449}.ll .ll-critical{background:#c0392b}
.ll .ll-warning{background:#b9770e}.ll .ll-empty{background:#5d6d7e}
.ll table.ll-table{border-collapse:collapse;width:100%;table-layout:fixed;margin:4px 0 10px}
.ll table.ll-table th,.ll table.ll-table td{text-align:left;vertical-align:top;padding:5px 8px;
  border-bottom:1px solid #e5e8eb;white-space:normal;overflow-wrap:anywhere;word-break:break-word}
.ll table.ll-table th{background:#f4f6f8;font-weight:600}
.ll table.ll-table td.ll-num,.ll table.ll-table th.ll-num{text-align:right;overflow-wrap:normal;
  word-break:normal}
.ll table.ll-row td,.ll table.ll-head th{padding:4px 5px;font-size:13px}
.ll table.ll-kv{table-layout:auto}
.ll table.ll-kv th{width:14em;background:none;font-weight:600;color:#52606d}
.ll .ll-finding{border:1px solid #d9dee3;border-left:5px solid #5d6d7e;border-radius:4px;
  padding:8px 12px;margin:8px 0;background:#fff}
.ll .ll-finding.ll-sev-critical{border-left-color:#c0392b}
.ll .ll-finding.ll-sev-warning{border-left-color:#b9770e}
.ll .ll-head{font-weight:600}
.ll .ll-meta{color:#52606d;font-weight:400}
.ll .ll-reason{margin:4px 0}
.ll .ll-label{color:#52606d;font-size:12px;text-transform:uppercase;letter-spacing:.04em;margin-top:4px}
.ll code,.ll pre{font-family:"SFMono-Regular",Menlo,Consolas,monospace;font-size:12.5px;background:#f4f6f8;
  border-radius:3px}
.ll code{padding:1px 4px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-all}
.ll pre.ll-next{margin:2px 0 4px;padding:6px 8px;white-space:pre-wrap;overflow-wrap:anywhere;
  word-break:normal;overflow:visible;border:0}
.ll details{margin:4px 0}
.ll summary{cursor:pointer;color:#2c5282}
.ll a{color:#2c5282}
.ll .ll-sev{font-weight:700;text-transform:uppercase;font-size:12px;letter-spacing:.04em}
.ll dl.ll-ev{display:grid;grid-template-columns:minmax(8em,max-content) 1fr;gap:2px 12px;margin:4px 0}
.ll dl.ll-ev dt{color:#52606d;width:auto;float:none;margin:0;padding:0;overflow-wrap:normal;word-break:normal}
.ll dl.ll-ev dd{margin:0;overflow-wrap:anywhere;word-break:break-word}
.ll .ll-muted{color:#52606d}
</style>"""

GROUP_CARDS = 100
"""Findings per (severity, kind) group shown as full cards; the rest of the group as table rows."""
MAX_ROWS = 20_000
"""Findings rendered into one page at most; beyond that the page says where the rest are."""


def _e(value: Any) -> str:
    return _html.escape("" if value is None or is_missing(value) else str(value))


def wrap(body: str) -> str:
    """``body`` inside the scoped ``.ll`` container with its stylesheet."""
    return f'{STYLE}<div class="ll">{body}</div>'


# --- the answer: banner and context ---------------------------------------------------------------------


def status(summary: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(``healthy`` | ``critical`` | ``warning`` | ``empty``, headline) of an audit run."""
    sev = summary.get("counts_by_severity") or {}
    crit, warn, info = (int(sev.get(s, 0) or 0) for s in SEVERITY_ORDER)
    scanned = (context or {}).get("scanned") or summary.get("inventory_counts") or {}
    nothing = not any(int(v or 0) for k, v in scanned.items() if k in TABLE_LABELS)
    suspicion = summary.get("suspected_wrong_root")
    if suspicion:  # the inputs look wrong: that is the answer, not the findings (audit.gates)
        return "warning", f"Suspected wrong root: {suspicion.get('message', '')}"
    if crit:
        extra = f", {plural(warn, 'warning')}" if warn else ""
        return "critical", f"{plural(crit, 'critical finding')}{extra}"
    if warn:
        return "warning", plural(warn, "warning")
    if nothing:
        return "empty", "Nothing was audited: the scan found no ledgers, topics or objects"
    return "healthy", "Healthy: no critical or warning findings" + (
        f" ({plural(info, 'informational finding')})" if info else ""
    )


def banner_html(summary: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> str:
    """The status banner: what state the cluster's storage is in, in one line."""
    state, headline = status(summary, context)
    sizes = summary.get("bytes_by_severity") or {}
    details = []
    if state in ("critical", "warning"):
        counts = summary.get("counts_by_severity") or {}
        details.append(", ".join(f"{int(v):,} {s}" for s, v in counts.items() if v))
        reclaim = int(sizes.get("warning") or 0)
        if reclaim:
            details.append(f"{human_bytes(reclaim)} in warning findings")
    elif state == "empty":
        details.append("check the ZooKeeper address, the ledgers root and the bucket below")
    else:
        details.append("every rule ran; see what was checked below")
    small = f"<small>{_e('; '.join(d for d in details if d))}</small>" if details else ""
    return (
        f'<div class="ll-banner ll-{state}" role="status" data-status="{state}">{_e(headline)}{small}</div>'
    )


def context_html(context: Mapping[str, Any]) -> str:
    """What was audited, as a key/value table (no credentials: addresses are already redacted)."""
    rows: list[tuple[str, str]] = [("cluster", _e(context.get("cluster")))]
    store = f"<code>{_e(context.get('zookeeper'))}</code>"
    if context.get("ledgers_root") and context.get("ledgers_root") != "/ledgers":
        store += f" (ledgers under <code>{_e(context.get('ledgers_root'))}</code>)"
    rows.append(("metadata store", f"ZooKeeper {store}"))
    if context.get("bucket"):
        rows.append(
            (
                "tiered storage",
                f"bucket <code>{_e(context['bucket'])}</code> at "
                f"<code>{_e(context.get('s3_endpoint'))}</code>",
            )
        )
    else:
        rows.append(("tiered storage", "not audited (no bucket given): offload rules did not run"))
    source = _e(context.get("source"))
    if context.get("sandbox"):
        source += f" &middot; sandbox <code>{_e(context['sandbox'])}</code>"
    rows.append(("source", source))
    settings = settings_html(context.get("context"))
    if settings:
        rows.append(("settings", settings))
    rows.append(("as of", _e(human_time(context.get("as_of_ms")))))
    scanned = context.get("scanned") or {}
    if scanned:
        parts = [
            f"{int(n):,} {_e(TABLE_LABELS.get(t, t))}"
            for t, n in scanned.items()
            if t in TABLE_LABELS or not t.startswith("_")
        ]
        rows.append(("scanned", ", ".join(parts)))
    th = context.get("thresholds") or {}
    if th:
        rows.append(
            (
                "thresholds",
                f"orphans older than {_e(human_duration(th.get('min_orphan_age_s')))}; retention grace "
                f"{_e(human_duration(th.get('retention_grace_s')))}",
            )
        )
    rows.append(
        (
            "run",
            f"ledgerlens {_e(context.get('ledgerlens_version'))}, "
            f"{_e(human_duration(context.get('duration_s')))}",
        )
    )
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="ll-table ll-kv" aria-label="what was audited"><tbody>{body}</tbody></table>'


def header_html(summary: Mapping[str, Any], context: Mapping[str, Any], title: str = "") -> str:
    """Title, banner and context: the top of a report."""
    h1 = f"<h1>{_e(title)}</h1>" if title else ""
    return wrap(h1 + banner_html(summary, context) + "<h2>What was audited</h2>" + context_html(context))


# --- findings ---------------------------------------------------------------------------------------


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [dict(r) for r in df.to_dict(orient="records")]


def _subject(row: Mapping[str, Any]) -> str:
    parts = []
    lid = row.get("ledger_id")
    if not is_missing(lid) and lid is not None:
        parts.append(f"ledger {int(lid)}")
    if row.get("object_key") and not is_missing(row.get("object_key")):
        parts.append(f"object <code>{_e(row['object_key'])}</code>")
    ml = row.get("managed_ledger")
    if ml and not is_missing(ml):
        parts.append(f"<code>{_e(_topic(str(ml)))}</code>")
    cur = row.get("cursor")
    if cur and not is_missing(cur):
        parts.append(f"subscription <code>{_e(cur)}</code>")
    return " &middot; ".join(parts)


def _topic(ml: str) -> str:
    from ledgerlens.formats.names import parse_managed_ledger

    try:
        return parse_managed_ledger(ml).topic
    except Exception:  # noqa: BLE001 - shown as stored
        return ml


def _ev_value(key: str, value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return _e(json.dumps(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if key.endswith("_ms") and value > 10**11:
            return f"{_e(human_time(int(value)))} <span class='ll-muted'>({int(value)})</span>"
        if key.endswith("_ms") and value >= 0:
            return _e(human_duration(value / 1000))
        if key.endswith("_s") and value >= 0:
            return _e(human_duration(value))
        if key in ("size", "length", "bytes", "bk_length", "held_bytes") or key.endswith("_bytes"):
            return f"{_e(human_bytes(value))} <span class='ll-muted'>({int(value):,} B)</span>"
        return _e(value)
    if isinstance(value, list):
        return "<br>".join(_ev_value(key, v) for v in value) or "[]"
    if isinstance(value, dict):
        return f"<code>{_e(json.dumps(value, sort_keys=True))}</code>"
    return f"<code>{_e(value)}</code>"


def evidence_html(evidence: Any) -> str:
    """Evidence JSON as a definition list (times, durations and sizes human-readable)."""
    ev = parse_evidence(evidence)
    if not ev:
        return '<span class="ll-muted">no evidence recorded</span>'
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_ev_value(k, v)}</dd>" for k, v in ev.items() if v is not None)
    return f'<dl class="ll-ev">{items}</dl>'


def _rule_anchor(kind: str) -> str:
    return f"rule-{kind}"


def _rule_ref(ex: Explanation, in_page: bool) -> str:
    href = f"#{_rule_anchor(ex.anchor)}" if in_page else _e(ex.rule)
    return f'rule: <a href="{href}" title="{_e(ex.rule)}">{_e(ex.rule)}</a>'


def finding_card_html(row: Mapping[str, Any], ex: Explanation, *, in_page_rules: bool = True) -> str:
    """One finding: severity, kind, subject, size and age; reason; path; next step; evidence; rule."""
    sev = str(row.get("severity") or "")
    meta = []
    if not is_missing(row.get("bytes")) and row.get("bytes") is not None:
        meta.append(human_bytes(row["bytes"]))
    if not is_missing(row.get("age_seconds")) and row.get("age_seconds") is not None:
        meta.append(f"{human_duration(row['age_seconds'])} old")
    color = SEVERITY_COLORS.get(sev, "#52606d")
    head = (
        f'<div class="ll-head"><span class="ll-sev" style="color:{color}">{_e(sev)}</span> '
        f"<code>{_e(row.get('kind'))}</code> {_subject(row)}"
        + (f' <span class="ll-meta">&middot; {_e(", ".join(meta))}</span>' if meta else "")
        + "</div>"
    )
    path = row.get("path")
    where = ""
    if path and not is_missing(path):
        where += f'<div><span class="ll-label">path</span> <code class="ll-path">{_e(path)}</code></div>'
    return (
        f'<div class="ll-finding ll-sev-{_e(sev)}" data-kind="{_e(row.get("kind"))}">{head}'
        f'<p class="ll-reason">{_e(ex.reason)}</p>{where}'
        f'<div class="ll-label">next step</div><pre class="ll-next">{_e(ex.next_step)}</pre>'
        f"<details><summary>evidence</summary>{evidence_html(row.get('evidence'))}</details>"
        f'<div class="ll-muted">{_rule_ref(ex, in_page_rules)}</div></div>'
    )


def _compact_rows(rows: Sequence[tuple[Mapping[str, Any], Explanation]]) -> str:
    body = "".join(
        f"<tr><td>{_subject(r)}</td><td>{_e(ex.reason)}</td><td><code>{_e(r.get('path') or '')}</code></td>"
        f"<td><details><summary>next step</summary><pre class='ll-next'>{_e(ex.next_step)}</pre>"
        f"{evidence_html(r.get('evidence'))}</details></td></tr>"
        for r, ex in rows
    )
    head = (
        '<colgroup><col style="width:22%"><col style="width:38%"><col style="width:20%">'
        '<col style="width:20%"></colgroup><thead><tr><th>finding</th><th>reason</th><th>path</th>'
        "<th>next step and evidence</th></tr></thead>"
    )
    return f'<table class="ll-table">{head}<tbody>{body}</tbody></table>'


def impact_key(df: pd.DataFrame) -> pd.DataFrame:
    """The sort key every view orders findings by (``order_findings``): impact tier
    (``text.impact_tier``: data loss, other critical, warning, info), new before known (when the
    findings carry a ``new`` column), bytes largest first, then kind."""
    new = df["new"] if "new" in df.columns else pd.Series(False, index=df.index)
    return pd.DataFrame(
        {
            "tier": [impact_tier(k, s) for k, s in zip(df["kind"], df["severity"], strict=True)],
            "known": ~new.fillna(False).astype(bool),
            "bytes": pd.to_numeric(df["bytes"], errors="coerce"),
            "kind": df["kind"].astype("string").fillna(""),
        },
        index=df.index,
    )


def order_findings(df: pd.DataFrame) -> pd.DataFrame:
    """By impact: data loss first, then other critical, warnings, info; new before known; within
    each, largest first (stable). ``top_findings`` and the explorer use the same order."""
    if df.empty:
        return df
    order = impact_key(df).sort_values(
        ["tier", "known", "bytes", "kind"],
        ascending=[True, True, False, True],
        na_position="last",
        kind="stable",
    )
    return df.loc[order.index]


def findings_html(
    df: pd.DataFrame,
    where: Mapping[str, Any] | AuditedWhere | None = None,
    *,
    severities: Iterable[str] = SEVERITY_ORDER,
    group_cards: int = GROUP_CARDS,
    max_rows: int = MAX_ROWS,
    open_info: bool = False,
    findings_path: str = "",
) -> str:
    """Every finding of ``severities``, grouped by severity and kind, critical first.

    Each group shows up to ``group_cards`` findings as full cards (reason, path, next step,
    evidence, rule) and the rest as a wrapping table in a collapsed block, so every finding is
    on the page without a fixed-height box. Past ``max_rows`` findings the page says how many
    more there are and where (``findings_path``).
    """
    wanted = list(severities)
    d = order_findings(df[df["severity"].isin(wanted)]) if not df.empty else df
    if d.empty:
        return wrap('<p class="ll-muted">No findings.</p>')
    shown = d.head(max_rows)
    w = AuditedWhere.of(where)
    out: list[str] = []
    for sev in [s for s in wanted if s in set(shown["severity"])]:
        sev_df = shown[shown["severity"] == sev]
        heading = f"{_e(sev.capitalize())}: {plural(len(sev_df), 'finding')}"
        out.append(f'<h2 id="findings-{_e(sev)}">{heading}</h2>')
        for kind, group in sev_df.groupby("kind", sort=False):
            rows = _records(group)
            pairs = [(r, explain(r, w)) for r in rows]
            size = int(pd.to_numeric(group["bytes"], errors="coerce").fillna(0).sum())
            sized = f", {human_bytes(size)}" if size else ""
            inner = "".join(finding_card_html(r, ex) for r, ex in pairs[:group_cards])
            if len(pairs) > group_cards:
                inner += (
                    f"<details><summary>{len(pairs) - group_cards:,} more {_e(kind)} findings</summary>"
                    f"{_compact_rows(pairs[group_cards:])}</details>"
                )
            opened = " open" if sev != "info" or open_info else ""
            out.append(
                f'<details class="ll-group" data-kind="{_e(kind)}"{opened}><summary><b>'
                f"<code>{_e(kind)}</code></b>: {plural(len(pairs), 'finding')}{sized}</summary>"
                f"{inner}</details>"
            )
    if len(d) > len(shown):
        where_rest = f" in <code>{_e(findings_path)}</code>" if findings_path else " in findings.parquet"
        more = len(d) - len(shown)
        out.append(f"<p><b>{more:,} more findings</b> are not drawn here; all are{where_rest}.</p>")
    return wrap("".join(out))


def finding_detail_html(row: Mapping[str, Any], where: Mapping[str, Any] | AuditedWhere | None = None) -> str:
    """Every field of one finding, its explanation and formatted evidence (the explorer's detail panel)."""
    ex = explain(row, where)
    fields = [
        (k, v)
        for k, v in row.items()
        if k not in ("evidence",) and v is not None and not is_missing(v) and str(v) != ""
    ]

    def fmt(k: str, v: Any) -> str:
        if k == "bytes":
            return f"{_e(human_bytes(v))} ({int(v):,} B)"
        if k == "age_seconds":
            return _e(human_duration(v))
        if k == "managed_ledger":
            return f"<code>{_e(v)}</code> ({_e(_topic(str(v)))})"
        if k in ("path", "object_key"):
            return f"<code>{_e(v)}</code>"
        if isinstance(v, float) and v.is_integer():  # ids of a nullable column read back as floats
            return _e(int(v))
        return _e(v)

    table = "".join(f"<tr><th>{_e(k)}</th><td>{fmt(k, v)}</td></tr>" for k, v in fields)
    sections = rule_sections()
    rule_text = sections.get(ex.anchor, "")
    rule = f"<p>{_rule_ref(ex, in_page=False)}</p>"
    if rule_text:
        rule += f"<details><summary>the rule</summary>{markdown_html(rule_text)}</details>"
    return wrap(
        f'<div class="ll-detail"><h3>{_e(row.get("kind"))}: {_subject(row)}</h3>'
        f'<p class="ll-reason">{_e(ex.reason)}</p>'
        f'<div class="ll-label">next step</div><pre class="ll-next">{_e(ex.next_step)}</pre>'
        f'<div class="ll-label">evidence</div>{evidence_html(row.get("evidence"))}'
        f'<div class="ll-label">fields</div><table class="ll-table ll-kv"><tbody>{table}</tbody></table>'
        f"{rule}</div>"
    )


# --- rules ------------------------------------------------------------------------------------------


def markdown_html(text: str) -> str:
    """Markdown (a rule section) as HTML, through nbconvert's own markdown renderer."""
    import mistune

    return str(mistune.html(text))


def rules_html(kinds: Iterable[str]) -> str:
    """The ``docs/audit-rules.md`` sections of ``kinds``, each with the in-page anchor cards link to."""
    sections = rule_sections()
    parts = []
    for kind in sorted(set(kinds)):
        body = sections.get(kind)
        text = markdown_html(body) if body else '<p class="ll-muted">no rule section found</p>'
        parts.append(
            f'<div id="{_rule_anchor(kind)}"><h3><code>{_e(kind)}</code></h3>{text}'
            f'<p class="ll-muted">docs/audit-rules.md#{_e(kind)}</p></div>'
        )
    if not parts:
        return ""
    return wrap("<h2>The rules behind these findings</h2>" + "".join(parts))


# --- compact table ------------------------------------------------------------------------------------

TABLE_COLUMNS = (
    "severity",
    "kind",
    "namespace",
    "managed_ledger",
    "ledger_id",
    "cursor",
    "object_key",
    "path",
    "bytes",
    "age_seconds",
)
_NUMERIC = ("bytes", "age_seconds", "ledger_id")
_HEADERS = {
    "age_seconds": "age",
    "managed_ledger": "topic",
    "ledger_id": "ledger",
    "object_key": "object key",
}


def severity_rank(severity: pd.Series) -> pd.Series:
    """critical -> 0, warning -> 1, info -> 2, anything else -> 3."""
    ranks = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return severity.map(ranks).fillna(len(ranks)).astype("int64")


def top_findings(df: pd.DataFrame, n: int = 50) -> pd.DataFrame:
    """The ``n`` most pressing findings, in ``order_findings``' order (data loss first)."""
    return order_findings(df).iloc[:n] if not df.empty else df


def _cell(column: str, value: Any) -> str:
    if value is None or is_missing(value):
        return ""
    if column == "bytes":
        return f'<span title="{int(value):,} bytes">{_e(human_bytes(value))}</span>'
    if column == "age_seconds":
        return f'<span title="{int(value)} s">{_e(human_duration(value))}</span>'
    if column == "ledger_id":
        return str(int(value))
    if column == "managed_ledger":
        return _e(_topic(str(value)))
    if column == "severity":
        color = SEVERITY_COLORS.get(str(value), "#1f2933")
        return f'<b style="color:{color}">{_e(value)}</b>'
    if column in ("path", "object_key"):
        return f"<code>{_e(value)}</code>"
    return _e(value)


def findings_table_html(
    df: pd.DataFrame, *, columns: Iterable[str] = TABLE_COLUMNS, max_rows: int = 200, caption: str = ""
) -> str:
    """A wrapping HTML table of findings (escaped; sizes and ages human-readable; no inner scroll)."""
    cols = [c for c in columns if c in df.columns]
    head = "".join(
        f"<th{' class=ll-num' if c in _NUMERIC else ''}>{_e(_HEADERS.get(c, c))}</th>" for c in cols
    )
    shown = df.head(max_rows)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{' class=ll-num' if c in _NUMERIC else ''}>{_cell(c, v)}</td>"
            for c, v in zip(cols, row, strict=True)
        )
        + "</tr>"
        for row in shown[cols].itertuples(index=False, name=None)
    )
    if df.empty:
        body = f'<tr><td colspan="{len(cols)}"><i>no findings</i></td></tr>'
    note = ""
    if len(df) > max_rows:
        note = f"<p><i>showing {max_rows} of {len(df)} findings</i></p>"
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return wrap(
        f'<table class="ll-table ledgerlens-findings">{cap}<thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{note}"
    )


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


def settings_html(context: Mapping[str, Any] | None) -> str:
    """The cluster context (``summary["context"]``): its name, and every setting with its origin
    in a collapsed table (values already redacted by ``Settings.public()``)."""
    if not context:
        return ""
    name = context.get("name")
    head = (
        f"Context: <strong>{_e(name)}</strong>" if name else "no named context (defaults, environment, flags)"
    )
    if context.get("file"):
        head += f" from <code>{_e(context['file'])}</code>"
    settings = context.get("settings") or {}
    rows = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td><code>{_e(v.get('value', ''))}</code></td>"
        f"<td>{_e(v.get('origin', ''))}</td></tr>"
        for k, v in settings.items()
    )
    table = (
        '<details><summary>every setting and where it came from</summary><table class="ll-table">'
        '<colgroup><col style="width:32%"><col style="width:36%"><col style="width:32%"></colgroup>'
        f"<thead><tr><th>setting</th><th>value</th><th>origin</th></tr></thead><tbody>{rows}</tbody>"
        "</table></details>"
        if rows
        else ""
    )
    return head + table


def error_html(error: BaseException) -> str:
    """A readable HTML block for an error shown in a notebook (no traceback)."""
    return (
        '<div style="border-left:4px solid #c0392b;padding:6px 10px;background:#fdf2f2">'
        f"<b>{_e(type(error).__name__)}</b>: {_e(str(error))}</div>"
    )
