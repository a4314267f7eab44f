"""The HTML views' stylesheet, their text colours, escaping and the scoped ``.ll`` container.

Styles are scoped under ``.ll`` so they win over JupyterLab's output styles (which right-align
table cells; ``.ll.ll`` where JupyterLab's own rule is as specific) and never leak into the page. The
``.ll`` block has its own light ground and dark text, and every rule that sets a background sets a
text colour too: the views read the same on JupyterLab's dark theme.
"""

from __future__ import annotations

import html as _html
from typing import Any

from ledgerlens.report.text import SEVERITY_COLORS, is_missing

STYLE = """<style>
.ll{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;font-size:14px;line-height:1.45;
  color:#1f2933;background:#fff;max-width:100%;box-sizing:border-box;overflow-wrap:anywhere}
.ll *{box-sizing:border-box}
.ll h1{font-size:24px;margin:4px 0 8px;color:#1f2933}
.ll h2{font-size:19px;margin:22px 0 8px;border-bottom:1px solid #d9dee3;padding-bottom:3px;color:#1f2933}
.ll h3{font-size:16px;margin:16px 0 6px;color:#1f2933}
.ll .ll-banner{padding:12px 16px;border-radius:6px;font-size:18px;font-weight:600;margin:6px 0 10px;
  color:#fff;background:#5d6d7e}
.ll .ll-banner small{display:block;font-size:14px;font-weight:400;margin-top:2px}
.ll .ll-banner .ll-worst{display:block;font-size:15px;font-weight:600;margin-top:6px}
.ll .ll-banner .ll-worst code{background:rgba(0,0,0,.25);color:#fff;font-size:14px}
.ll .ll-healthy{background:#1e8449;color:#fff}.ll .ll-critical{background:#c0392b;color:#fff}
.ll .ll-warning{background:#9a6309;color:#fff}.ll .ll-empty{background:#5d6d7e;color:#fff}
.ll table.ll-table{border-collapse:collapse;width:100%;table-layout:fixed;margin:4px 0 10px}
.ll table.ll-table th,.ll table.ll-table td{text-align:left;vertical-align:top;padding:5px 8px;
  border-bottom:1px solid #e5e8eb;white-space:normal;overflow-wrap:anywhere;word-break:break-word}
.ll table.ll-table td{background:#fff;color:#1f2933}
.ll table.ll-table th{background:#f4f6f8;color:#1f2933;font-weight:600}
.ll table.ll-table td.ll-num,.ll table.ll-table th.ll-num{text-align:right;overflow-wrap:normal;
  word-break:normal}
.ll table.ll-row td,.ll table.ll-head th{padding:4px 5px;font-size:13px}
.ll table.ll-kv{table-layout:auto}
.ll table.ll-kv th{width:14em;background:#fff;font-weight:600;color:#52606d}
.ll .ll-finding{border:1px solid #d9dee3;border-left:5px solid #5d6d7e;border-radius:4px;
  padding:8px 12px;margin:8px 0;background:#fff;color:#1f2933}
.ll .ll-finding.ll-sev-critical{border-left-color:#c0392b}
.ll .ll-finding.ll-sev-warning{border-left-color:#b9770e}
.ll .ll-finding.ll-is-new{box-shadow:inset 3px 0 0 #2c5282}
.ll .ll-new{display:inline-block;background:#2c5282;color:#fff;border-radius:3px;padding:0 5px;
  font-size:11px;font-weight:700;text-transform:uppercase;letter-spacing:.04em;vertical-align:1px}
.ll .ll-head{font-weight:600}
.ll .ll-meta{color:#52606d;font-weight:400}
.ll .ll-reason{margin:4px 0}
.ll .ll-label{color:#52606d;font-size:12px;text-transform:uppercase;letter-spacing:.04em;margin-top:4px}
.ll.ll code,.ll.ll :not(pre)>code,.ll.ll pre{font-family:"SFMono-Regular",Menlo,Consolas,monospace;
  font-size:12.5px;background:#f4f6f8;color:#1f2933;border-radius:3px}
.ll code{padding:1px 4px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-all}
.ll pre.ll-next{margin:2px 0 4px;padding:6px 8px;white-space:pre-wrap;overflow-wrap:anywhere;
  word-break:normal;overflow:visible;border:0}
.ll pre code{padding:0;background:#f4f6f8;color:#1f2933}
.ll details{margin:4px 0}
.ll summary{cursor:pointer;color:#2c5282}
.ll a,.ll a:link,.ll a:visited{color:#2c5282}
.ll .ll-sev{font-weight:700;text-transform:uppercase;font-size:12px;letter-spacing:.04em}
.ll dl.ll-ev{display:grid;grid-template-columns:minmax(8em,max-content) 1fr;gap:2px 12px;margin:4px 0}
.ll dl.ll-ev dt{color:#52606d;width:auto;float:none;margin:0;padding:0;overflow-wrap:normal;word-break:normal}
.ll dl.ll-ev dd{margin:0;overflow-wrap:anywhere;word-break:break-word}
.ll .ll-muted{color:#52606d}
.ll .ll-glance{display:grid;grid-template-columns:repeat(auto-fit,minmax(270px,1fr));gap:4px 24px;
  border:1px solid #d9dee3;border-radius:6px;padding:6px 14px 8px;margin:4px 0 12px;background:#fbfcfd;
  color:#1f2933}
.ll .ll-glance h3{margin:6px 0 4px;font-size:12px;text-transform:uppercase;letter-spacing:.05em;
  color:#52606d}
.ll .ll-glance ul{margin:0;padding:0;list-style:none}
.ll .ll-glance li{margin:2px 0}
.ll .ll-glance p{margin:2px 0}
.ll .ll-tier{display:inline-block;min-width:5.6em;font-weight:700}
.ll code.ll-kind{white-space:nowrap;word-break:normal}
</style>"""

TEXT_COLORS = {**SEVERITY_COLORS, "warning": "#8d5d0b"}
"""Severity colours for text: at least 4.5:1 on the views' light grounds (the warning amber of the
figures and borders is darker here)."""


def esc(value: Any) -> str:
    """``value`` as escaped HTML text; None and missing values (NaN, NA) as ""."""
    return _html.escape("" if value is None or is_missing(value) else str(value))


def wrap(body: str) -> str:
    """``body`` inside the scoped ``.ll`` container with its stylesheet."""
    return f'{STYLE}<div class="ll">{body}</div>'
