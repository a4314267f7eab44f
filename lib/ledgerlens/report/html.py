"""HTML views of an audit for reports, notebooks and widgets (no ipywidgets: headless runs need no UI).

- ``banner_html``: the answer first: healthy, N critical (N new), N warning, or nothing scanned;
  and the worst finding by name.
- ``glance_html``: at a glance, above everything long: counts by impact and kind, what changed since
  the previous run, where the bookies' disk goes.
- ``context_html``: what was audited (cluster, stores, as-of, counts scanned, version, duration).
- ``findings_html``: every finding with its reason, path, next step, evidence and rule, in impact
  order (``order_findings``: data loss first), grouped by impact tier and kind, new ones marked.
- ``finding_detail_html``: one finding, all fields (the explorer's detail panel).
- ``findings_table_html``: a compact, wrapping table (no inner scrollbars).
- ``rules_html``: the rules' sections of ``docs/audit-rules.md`` for the kinds shown.

Everything is escaped; styles are scoped under ``.ll`` (``ledgerlens.report.style``: why, and how
the views read the same on JupyterLab's dark theme). The Markdown summaries of a run are in
``ledgerlens.report.markdown``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.report.context import TABLE_LABELS
from ledgerlens.report.explanations import (
    AuditedWhere,
    Explanation,
    Finding,
    explain,
    parse_evidence,
    rule_sections,
)
from ledgerlens.report.style import STYLE as STYLE  # the views' stylesheet, as the explorer imports it
from ledgerlens.report.style import TEXT_COLORS, wrap
from ledgerlens.report.style import esc as _e
from ledgerlens.report.text import (
    IMPACT_TIERS,
    SEVERITY_ORDER,
    human_bytes,
    human_duration,
    human_time,
    impact_tier,
    is_missing,
    plural,
)

GROUP_CARDS = 100
"""Findings per (severity, kind) group shown as full cards; the rest of the group as table rows."""
MAX_ROWS = 20_000
"""Findings rendered into one page at most; beyond that the page says where the rest are."""


# --- the answer: banner and context ---------------------------------------------------------------------


def compared(summary: Mapping[str, Any]) -> bool:
    """True when this run was compared with a previous one (its ``new`` counts and marks mean something:
    on a first run every finding is new)."""
    return bool(summary.get("previous"))


def _new_of(summary: Mapping[str, Any], severity: str) -> int:
    if not compared(summary):
        return 0
    return int((summary.get("new_by_severity") or {}).get(severity) or 0)


def _counted(n: int, word: str, new: int, many: str | None = None) -> str:
    return plural(n, word, many) + (f" ({new:,} new)" if new else "")


def status(summary: Mapping[str, Any], context: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(``healthy`` | ``critical`` | ``warning`` | ``empty``, headline) of an audit run.

    The headline counts the new findings of each severity when the run was compared with a previous
    one: ``'3 critical findings (1 new), 20 warnings'``."""
    sev = summary.get("counts_by_severity") or {}
    crit, warn, info = (int(sev.get(s, 0) or 0) for s in SEVERITY_ORDER)
    scanned = (context or {}).get("scanned") or summary.get("inventory_counts") or {}
    nothing = not any(int(v or 0) for k, v in scanned.items() if k in TABLE_LABELS)
    suspicion = summary.get("suspected_wrong_root")
    if suspicion:  # the inputs look wrong: that is the answer, not the findings (audit.gates)
        return "warning", f"Suspected wrong root: {suspicion.get('message', '')}"
    warnings = _counted(warn, "warning", _new_of(summary, "warning"))
    if crit:
        extra = f", {warnings}" if warn else ""
        return "critical", f"{_counted(crit, 'critical finding', _new_of(summary, 'critical'))}{extra}"
    if warn:
        return "warning", warnings
    if nothing:
        return "empty", "Nothing was audited: the scan found no ledgers, topics or objects"
    return "healthy", "Healthy: no critical or warning findings" + (
        f" ({plural(info, 'informational finding')})" if info else ""
    )


def banner_html(
    summary: Mapping[str, Any], context: Mapping[str, Any] | None = None, findings: pd.DataFrame | None = None
) -> str:
    """The status banner: what state the cluster's storage is in, in one line, and with ``findings``
    the worst of them by name (``worst_finding``: the first in impact order)."""
    state, headline = status(summary, context)
    sizes = summary.get("bytes_by_severity") or {}
    details = []
    worst = ""
    if state in ("critical", "warning"):
        counts = summary.get("counts_by_severity") or {}
        details.append(", ".join(f"{int(counts[s]):,} {s}" for s in SEVERITY_ORDER if counts.get(s)))
        reclaim = int(sizes.get("warning") or 0)
        if reclaim:
            details.append(f"{human_bytes(reclaim)} in warning findings")
        name = worst_finding(findings) if findings is not None and len(findings) else ""
        if name:
            worst = f'<span class="ll-worst" data-worst>Worst: <code>{_e(name)}</code></span>'
    elif state == "empty":
        details.append("check the ZooKeeper address, the ledgers root and the bucket below")
    else:
        details.append("every rule ran; see what was checked below")
    small = f"<small>{_e('; '.join(d for d in details if d))}</small>" if details else ""
    return (
        f'<div class="ll-banner ll-{state}" role="status" data-status="{state}">{_e(headline)}{worst}'
        f"{small}</div>"
    )


# --- at a glance ------------------------------------------------------------------------------------


def _tier_anchor(tier: int) -> str:
    return "findings-" + (IMPACT_TIERS[tier] if tier < len(IMPACT_TIERS) else "other").replace(" ", "-")


def _tier_name(tier: int) -> str:
    return IMPACT_TIERS[tier] if tier < len(IMPACT_TIERS) else "other"


def _glance_findings(findings: pd.DataFrame | None, marks: bool) -> str:
    if findings is None or findings.empty:
        return ""
    d = order_findings(findings)
    key = impact_key(d)
    lines = []
    for tier in dict.fromkeys(key["tier"]):
        at = d[key["tier"] == tier]
        new = int((~key.loc[at.index, "known"]).sum()) if marks else 0
        size = int(pd.to_numeric(at["bytes"], errors="coerce").fillna(0).sum())
        kinds = at["kind"].value_counts(sort=False)
        names = " &middot; ".join(
            f'<code class="ll-kind">{_e(k)}</code>&nbsp;{int(n):,}' for k, n in kinds.items()
        )
        color = TEXT_COLORS.get(str(at["severity"].iloc[0]), "#52606d")
        lines.append(
            f'<li><a class="ll-tier" style="color:{color}" href="#{_tier_anchor(tier)}">'
            f"{_e(_tier_name(tier))}</a> <b>{len(at):,}</b>"
            + (f' <span class="ll-new">{new:,} new</span>' if new else "")
            + (f' <span class="ll-muted">({_e(human_bytes(size))})</span>' if size else "")
            + f": {names}</li>"
        )
    return f"<div><h3>Findings by impact and kind</h3><ul>{''.join(lines)}</ul></div>"


def _by_severity_text(counts: Mapping[str, Any] | None) -> str:
    parts = [f"{int(v):,} {s}" for s, v in (counts or {}).items() if v]
    return f" ({', '.join(parts)})" if parts else ""


def _glance_changes(summary: Mapping[str, Any]) -> str:
    if "previous" not in summary and "new_total" not in summary:
        return ""  # written by a release that did not compare runs
    previous = summary.get("previous")
    if not previous:
        note = summary.get("previous_note")
        text = "First run here: no previous run to compare with." + (
            f' <span class="ll-muted">{_e(note)}</span>' if note else ""
        )
        return f"<div><h3>Since the previous run</h3><p>{text}</p></div>"
    when = human_time(previous.get("as_of_ms")) if isinstance(previous, Mapping) else ""
    new, resolved = int(summary.get("new_total") or 0), int(summary.get("resolved_total") or 0)
    return (
        f"<div><h3>Since the previous run{f' ({_e(when)})' if when else ''}</h3><ul>"
        f"<li><b>{new:,} new</b>{_e(_by_severity_text(summary.get('new_by_severity')))}</li>"
        f"<li><b>{resolved:,} resolved</b>{_e(_by_severity_text(summary.get('resolved_by_severity')))}</li>"
        "</ul></div>"
    )


def _disk_frame(summary: Mapping[str, Any]) -> pd.DataFrame | None:
    usage = summary.get("disk_usage") or {}
    by_state = usage.get("by_state") or {}
    if not by_state:
        return None
    ledgers = usage.get("ledgers_by_state") or {}
    rows = [
        {"tenant": "", "namespace": "", "state": s, "ledgers": int(ledgers.get(s) or 0), "bytes": int(b or 0)}
        for s, b in by_state.items()
    ]
    return pd.DataFrame(rows, columns=["tenant", "namespace", "state", "ledgers", "bytes"])


def _glance_disk(summary: Mapping[str, Any], disk: pd.DataFrame | None) -> str:
    frame = disk if disk is not None and not disk.empty else _disk_frame(summary)
    if frame is None:
        return ""  # an audit written before disk usage was measured
    from ledgerlens.report.disk import disk_states_html  # plotly: only for the views that draw disks

    replicated = bool((summary.get("disk_usage") or {}).get("replicated"))
    what = "BookKeeper disk (all copies)" if replicated else "BookKeeper disk"
    return f"<div><h3>{what}</h3>{disk_states_html(frame)}</div>"


def glance_html(
    summary: Mapping[str, Any], findings: pd.DataFrame | None = None, disk: pd.DataFrame | None = None
) -> str:
    """At a glance (an unwrapped ``.ll-glance`` block): findings by impact tier and kind with the new
    ones counted, what changed since the previous run, and where the bookies' disk goes (``disk``:
    the ``disk_usage.parquet`` frame, else ``summary["disk_usage"]``). Parts without data are left out."""
    parts = [
        _glance_findings(findings, compared(summary)),
        _glance_changes(summary),
        _glance_disk(summary, disk),
    ]
    body = "".join(p for p in parts if p)
    return f'<section class="ll-glance" aria-label="at a glance">{body}</section>' if body else ""


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


def header_html(
    summary: Mapping[str, Any],
    context: Mapping[str, Any],
    title: str = "",
    *,
    findings: pd.DataFrame | None = None,
    disk: pd.DataFrame | None = None,
) -> str:
    """The top of a report: title, banner (naming the worst of ``findings``) and the at-a-glance block."""
    h1 = f"<h1>{_e(title)}</h1>" if title else ""
    return wrap(h1 + banner_html(summary, context, findings) + glance_html(summary, findings, disk))


def audited_html(context: Mapping[str, Any]) -> str:
    """The "What was audited" section: the context table under its heading."""
    return wrap("<h2>What was audited</h2>" + context_html(context))


def run_details_html(summary: Mapping[str, Any]) -> str:
    """The run's whole ``summary.json``, collapsed: every count and timing, for who needs them."""
    text = json.dumps(summary, indent=1, sort_keys=True, default=str)
    return wrap(
        '<details class="ll-run"><summary>this run\'s summary.json</summary>'
        f'<pre class="ll-next">{_e(text)}</pre></details>'
    )


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


def is_new(row: Mapping[str, Any]) -> bool:
    """The finding was not in the previous run (its ``new`` column; False where there is none)."""
    value = row.get("new")
    return bool(value) if value is not None and not is_missing(value) else False


def new_mark() -> str:
    """The visible "new" mark of a finding first seen in this run."""
    return '<span class="ll-new" title="not in the previous run">new</span>'


def finding_card_html(
    row: Mapping[str, Any], ex: Explanation, *, in_page_rules: bool = True, mark_new: bool = True
) -> str:
    """One finding: severity, kind, subject, size and age; reason; path; next step; evidence; rule.

    ``mark_new``: a finding not in the previous run (``new``) carries the "new" mark."""
    sev = str(row.get("severity") or "")
    new = mark_new and is_new(row)
    meta = []
    if not is_missing(row.get("bytes")) and row.get("bytes") is not None:
        meta.append(human_bytes(row["bytes"]))
    if not is_missing(row.get("age_seconds")) and row.get("age_seconds") is not None:
        meta.append(f"{human_duration(row['age_seconds'])} old")
    color = TEXT_COLORS.get(sev, "#52606d")
    head = (
        f'<div class="ll-head">{new_mark() + " " if new else ""}'
        f'<span class="ll-sev" style="color:{color}">{_e(sev)}</span> '
        f"<code>{_e(row.get('kind'))}</code> {_subject(row)}"
        + (f' <span class="ll-meta">&middot; {_e(", ".join(meta))}</span>' if meta else "")
        + "</div>"
    )
    path = row.get("path")
    where = ""
    if path and not is_missing(path):
        where += f'<div><span class="ll-label">path</span> <code class="ll-path">{_e(path)}</code></div>'
    return (
        f'<div class="ll-finding ll-sev-{_e(sev)}{" ll-is-new" if new else ""}" '
        f'data-kind="{_e(row.get("kind"))}"{" data-new" if new else ""}>{head}'
        f'<p class="ll-reason">{_e(ex.reason)}</p>{where}'
        f'<div class="ll-label">next step</div><pre class="ll-next">{_e(ex.next_step)}</pre>'
        f"<details><summary>evidence</summary>{evidence_html(row.get('evidence'))}</details>"
        f'<div class="ll-muted">{_rule_ref(ex, in_page_rules)}</div></div>'
    )


def _compact_rows(rows: Sequence[tuple[Mapping[str, Any], Explanation]], mark_new: bool = True) -> str:
    body = "".join(
        f"<tr><td>{new_mark() + ' ' if mark_new and is_new(r) else ''}{_subject(r)}</td>"
        f"<td>{_e(ex.reason)}</td><td><code>{_e(r.get('path') or '')}</code></td>"
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
    mark_new: bool = True,
) -> str:
    """Every finding of ``severities`` in impact order (``order_findings``), one section per impact
    tier (data loss, critical, warning, info), and in each the findings grouped by kind, the new ones'
    groups first (``mark_new``: marked "new"; pass ``compared(summary)`` so a first run marks none).

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
    key = impact_key(shown)
    if not mark_new:
        key = key.assign(known=True)
    w = AuditedWhere.of(where)
    out: list[str] = []
    for tier in dict.fromkeys(key["tier"]):
        at = shown[key["tier"] == tier]
        news = int((~key.loc[at.index, "known"]).sum())
        heading = f"{_e(_tier_name(tier).capitalize())}: {plural(len(at), 'finding')}"
        heading += f" {new_mark()}&nbsp;{news:,}" if news else ""
        out.append(f'<h2 id="{_tier_anchor(tier)}">{heading}</h2>')
        groups = at.groupby([key.loc[at.index, "known"], at["kind"]], sort=False)
        for (known, kind), group in groups:
            out.append(_group_html(str(kind), group, w, group_cards, not known, open_info or tier < 3))
    if len(d) > len(shown):
        where_rest = f" in <code>{_e(findings_path)}</code>" if findings_path else " in findings.parquet"
        more = len(d) - len(shown)
        out.append(f"<p><b>{more:,} more findings</b> are not drawn here; all are{where_rest}.</p>")
    return wrap("".join(out))


def _group_html(
    kind: str, group: pd.DataFrame, where: AuditedWhere, group_cards: int, new: bool, opened: bool
) -> str:
    """One kind's findings of one tier (its new ones, or its known ones): cards, then a table."""
    pairs = [(r, explain(r, where)) for r in _records(group)]
    size = int(pd.to_numeric(group["bytes"], errors="coerce").fillna(0).sum())
    sized = f", {human_bytes(size)}" if size else ""
    inner = "".join(finding_card_html(r, ex, mark_new=new) for r, ex in pairs[:group_cards])
    if len(pairs) > group_cards:
        inner += (
            f"<details><summary>{len(pairs) - group_cards:,} more {_e(kind)} findings</summary>"
            f"{_compact_rows(pairs[group_cards:], mark_new=new)}</details>"
        )
    mark = f"{new_mark()} " if new else ""
    return (
        f'<details class="ll-group" data-kind="{_e(kind)}"{" open" if opened else ""}><summary>{mark}<b>'
        f"<code>{_e(kind)}</code></b>: {plural(len(pairs), 'finding')}{sized}</summary>{inner}</details>"
    )


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
        if k == "first_seen":
            return _e(human_time(v))
        if k == "new":
            return "yes: not in the previous run" if v else "no: seen before"
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
    import mistune  # nbconvert's markdown renderer (~130 ms): only when rule sections are shown

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


def worst_finding(findings: Any) -> str:
    """``'missing_ledger ledger 42 of persistent://t/ns/x'``: the most severe, largest finding."""
    if findings is None or len(findings) == 0:
        return ""
    row = top_findings(pd.DataFrame(findings), 1).iloc[0].to_dict()
    f = Finding(row)
    what = [f.kind]
    if f.ledger_id is not None:
        what.append(f"ledger {f.ledger_id}")
    elif f.object_key:
        what.append(f"object {f.object_key}")
    elif f.path:
        what.append(f.path)
    if f.topic or f.managed_ledger:
        what.append(f"of {f.owner}")
    return " ".join(what)


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
        color = TEXT_COLORS.get(str(value), "#1f2933")
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
        '<div style="border-left:4px solid #c0392b;padding:6px 10px;background:#fdf2f2;color:#1f2933">'
        f"<b>{_e(type(error).__name__)}</b>: {_e(str(error))}</div>"
    )
