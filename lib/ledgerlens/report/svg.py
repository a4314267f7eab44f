"""Bar figures as inline SVG: the static report's figures without plotly.js.

``figure_svg`` draws a plotly ``Figure`` of bar traces (the house figures of ``report.figures`` and
``report.disk``: stacked or grouped, horizontal or vertical) as one ``<svg>``: its title, legend,
category labels, the value axis with the figure's own tick labels when it sets them (binary sizes),
each bar's total at its end, and every segment's hover text as a tooltip. A figure with any other
trace type gives None (the caller keeps plotly for it). Colours are explicit, dark ink on a white
ground, so the figure reads the same on a light or a dark page.
"""

from __future__ import annotations

import html as _html
import math
import re
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import plotly.graph_objects as go

from ledgerlens.report.text import human_bytes

WIDTH = 860
"""Drawing width (the SVG scales down with its container, never up)."""
FONT = 12
CHAR = 6.8
"""Average glyph width at ``FONT`` px in the sans-serif stack: enough room for labels, never a clip."""
ROW = 24
BAR = 16
PLOT_HEIGHT = 220
INK, MUTED, GRID, GROUND = "#1f2933", "#52606d", "#e5e8eb", "#ffffff"
PALETTE = ("#2c7fb8", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085", "#7f8c8d", "#f1c40f")
FONTS = "-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"


@dataclass
class _Series:
    name: str
    color: str
    values: dict[str, float] = field(default_factory=dict)
    tips: dict[str, str] = field(default_factory=dict)


@dataclass
class _Chart:
    title: str
    horizontal: bool
    stacked: bool
    categories: list[str]
    series: list[_Series]
    ticks: list[tuple[float, str]]
    top: float
    bytes_axis: bool
    value_title: str
    category_title: str


def _e(value: Any) -> str:
    return _html.escape(str(value), quote=True)


def _number(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"


def _hover(trace: Any, category: str, value: float, text: Any, custom: Any, horizontal: bool) -> str:
    """The segment's tooltip: the trace's hover template filled in, as plain text."""
    shown = str(text) if text not in (None, "") else _number(value)
    template = trace.hovertemplate
    if not isinstance(template, str) or not template:
        return f"{category}: {shown} ({trace.name})" if trace.name else f"{category}: {shown}"
    fields = {
        "x": _number(value) if horizontal else category,
        "y": category if horizontal else _number(value),
        "text": "" if text is None else str(text),
        "customdata": _number(float(custom))
        if isinstance(custom, Real)
        else ("" if custom is None else custom),
    }
    out = re.sub(r"<extra>(.*?)</extra>", lambda m: f" ({m.group(1)})" if m.group(1) else "", template)
    out = re.sub(r"%\{(\w+)(?::[^}]*)?\}", lambda m: str(fields.get(m.group(1), "")), out)
    out = re.sub(r"<br\s*/?>", " · ", out)
    return _html.unescape(re.sub(r"<[^>]+>", "", out)).strip()


def _seq(value: Any) -> list[Any]:
    """A plotly data array (tuple, list or numpy array; None) as a list."""
    return [] if value is None else list(value)


def _per_point(value: Any, n: int) -> list[Any]:
    if value is None:
        return [None] * n
    if isinstance(value, str | int | float):
        return [value] * n
    return list(value) + [None] * (n - len(value))


def _series(fig: go.Figure, horizontal: bool) -> tuple[list[str], list[_Series]]:
    colorway = list(fig.layout.colorway or fig.layout.template.layout.colorway or PALETTE)
    seen: list[str] = []
    series = []
    for i, t in enumerate(fig.data):
        cats = [str(c) for c in _seq(t.y if horizontal else t.x)]
        vals = _seq(t.x if horizontal else t.y)
        texts, custom = _per_point(t.text, len(cats)), _per_point(t.customdata, len(cats))
        color = t.marker.color if isinstance(t.marker.color, str) else colorway[i % len(colorway)]
        s = _Series(str(t.name or ""), color)
        for c, v, tx, cd in zip(cats, vals, texts, custom, strict=False):
            value = 0.0 if v is None or math.isnan(float(v)) else float(v)
            s.values[c] = s.values.get(c, 0.0) + value
            s.tips[c] = _hover(t, c, value, tx, cd, horizontal)
            if c not in seen:
                seen.append(c)
        series.append(s)
    axis = fig.layout.yaxis if horizontal else fig.layout.xaxis
    order = [str(c) for c in _seq(axis.categoryarray)]
    cats = [c for c in order if c in seen] + [c for c in seen if c not in order]
    # plotly draws a horizontal chart's first category at the bottom: the page reads top-down
    return (list(reversed(cats)) if horizontal else cats), series


def _nice_ticks(top: float, n: int = 5) -> list[tuple[float, str]]:
    if top <= 0:
        return [(0.0, "0")]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if top >= 1 and step < 1:
        step = 1
    count = math.ceil(top / step - 1e-9)
    return [(k * step, _number(k * step)) for k in range(count + 1)]


def _chart(fig: go.Figure) -> _Chart:
    horizontal = any(t.orientation == "h" for t in fig.data)
    cats, series = _series(fig, horizontal)
    stacked = fig.layout.barmode in ("stack", "relative")
    sums = [(sum if stacked else max)([s.values.get(c, 0.0) for s in series] or [0.0]) for c in cats]
    vmax = max(sums or [0.0])
    axis = fig.layout.xaxis if horizontal else fig.layout.yaxis
    cat_axis = fig.layout.yaxis if horizontal else fig.layout.xaxis
    tickvals = _seq(axis.tickvals)
    if axis.tickmode == "array" and tickvals:
        text = _seq(axis.ticktext) or [_number(v) for v in tickvals]
        ticks = [(float(v), str(t)) for v, t in zip(tickvals, text, strict=False)]
    else:
        ticks = _nice_ticks(vmax)
    top = max([vmax, *(v for v, _ in ticks)]) or 1.0
    return _Chart(
        title=str(fig.layout.title.text or ""),
        horizontal=horizontal,
        stacked=stacked,
        categories=cats,
        series=series,
        ticks=ticks,
        top=top,
        bytes_axis=any(str(t).endswith("B") for _, t in ticks),
        value_title=str(axis.title.text or ""),
        category_title=str(cat_axis.title.text or ""),
    )


def _fit(text: str, width: float) -> str:
    room = max(int(width / CHAR), 4)
    return text if len(text) <= room else text[: room - 1] + "…"


def _text(x: float, y: float, s: str, *, anchor: str = "start", color: str = INK, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}"{extra}>{_e(s)}</text>'


def _legend(series: list[_Series], y: float, x0: float, x1: float) -> tuple[list[str], float]:
    named = [s for s in series if s.name]
    if not named:
        return [], 0.0
    out, x, line = [], x0, 0
    for s in named:
        w = 12 + 6 + len(s.name) * CHAR + 18
        if x + w > x1 and x > x0:
            x, line = x0, line + 1
        yy = y + line * 20
        out.append(f'<rect x="{x:.1f}" y="{yy - 10:.1f}" width="12" height="12" fill="{_e(s.color)}"/>')
        out.append(_text(x + 18, yy, s.name))
        x += w
    return out, (line + 1) * 20.0


def _label(c: _Chart, total: float) -> str:
    return human_bytes(total) if c.bytes_axis else _number(total)


def _total(c: _Chart, cat: str) -> float:
    values = [s.values.get(cat, 0.0) for s in c.series] or [0.0]
    return sum(values) if c.stacked else max(values)


def _segments(c: _Chart, cat: str) -> list[tuple[_Series, float]]:
    return [(s, s.values[cat]) for s in c.series if s.values.get(cat, 0.0) > 0]


def _horizontal(c: _Chart, y0: float) -> tuple[list[str], float]:
    longest = max((len(x) for x in c.categories), default=4)
    label_w = min(longest * CHAR + 12, WIDTH * 0.4)
    x0, x1 = label_w + 8, WIDTH - 80
    scale = (x1 - x0) / c.top
    height = ROW * len(c.categories)
    out = [f'<line x1="{x0 + v * scale:.1f}" y1="{y0}" x2="{x0 + v * scale:.1f}" y2="{y0 + height}" '
           f'stroke="{GRID}"/>' for v, _ in c.ticks]  # fmt: skip
    out += [_text(x0 + v * scale, y0 + height + 16, t, anchor="middle", color=MUTED) for v, t in c.ticks]
    for i, cat in enumerate(c.categories):
        top = y0 + i * ROW + (ROW - BAR) / 2
        label = _text(x0 - 8, top + BAR - 4, _fit(cat, label_w), anchor="end")
        out.append(f"<g><title>{_e(cat)}</title>{label}</g>")
        segs, x, total = _segments(c, cat), x0, 0.0
        n = max(len(segs), 1)
        for j, (s, v) in enumerate(segs):
            w = v * scale
            yy, hh = (top, BAR) if c.stacked else (top + j * BAR / n, BAR / n)
            out.append(
                f'<rect x="{x:.1f}" y="{yy:.1f}" width="{max(w, 1):.1f}" height="{hh:.1f}" '
                f'fill="{_e(s.color)}"><title>{_e(s.tips.get(cat, ""))}</title></rect>'
            )
            x, total = (x + w, total + v) if c.stacked else (x, max(total, v))
        end = x if c.stacked else x0 + total * scale
        out.append(_text(end + 5, top + BAR - 4, _label(c, total), color=MUTED))
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 + height}" stroke="{MUTED}"/>')
    if c.value_title:
        out.append(_text((x0 + x1) / 2, y0 + height + 34, c.value_title, anchor="middle", color=MUTED))
    return out, height + (44 if c.value_title else 26)


def _vertical(c: _Chart, y0: float) -> tuple[list[str], float]:
    tick_w = max((len(t) for _, t in c.ticks), default=1) * CHAR
    x0, x1 = tick_w + (30 if c.value_title else 12), WIDTH - 10
    slot = (x1 - x0) / max(len(c.categories), 1)
    longest = max((len(x) for x in c.categories), default=1) * CHAR
    rotate = longest > slot - 6
    label_h = min(longest, 220) * 0.6 + 16 if rotate else 20
    scale = PLOT_HEIGHT / c.top
    base = y0 + PLOT_HEIGHT
    out = [f'<line x1="{x0}" y1="{base - v * scale:.1f}" x2="{x1}" y2="{base - v * scale:.1f}" '
           f'stroke="{GRID}"/>' for v, _ in c.ticks]  # fmt: skip
    out += [_text(x0 - 6, base - v * scale + 4, t, anchor="end", color=MUTED) for v, t in c.ticks]
    if c.value_title:
        mid = y0 + PLOT_HEIGHT / 2
        out.append(_text(12, mid, c.value_title, anchor="middle", color=MUTED,
                         extra=f' transform="rotate(-90 12 {mid:.1f})"'))  # fmt: skip
    bar_w = min(slot * 0.7, 64)
    totals_fit = all(len(_label(c, _total(c, cat))) * CHAR <= slot - 2 for cat in c.categories)
    for i, cat in enumerate(c.categories):
        cx = x0 + slot * (i + 0.5)
        segs, y, total = _segments(c, cat), base, 0.0
        n = max(len(segs), 1)
        for j, (s, v) in enumerate(segs):
            h = v * scale
            xx, ww = (cx - bar_w / 2, bar_w) if c.stacked else (cx - bar_w / 2 + j * bar_w / n, bar_w / n)
            top = y - h if c.stacked else base - h
            out.append(
                f'<rect x="{xx:.1f}" y="{top:.1f}" width="{ww:.1f}" height="{max(h, 1):.1f}" '
                f'fill="{_e(s.color)}"><title>{_e(s.tips.get(cat, ""))}</title></rect>'
            )
            y, total = (y - h, total + v) if c.stacked else (y, max(total, v))
        if totals_fit:  # else the tooltips carry them: overlapping numbers help nobody
            out.append(_text(cx, base - total * scale - 5, _label(c, total), anchor="middle", color=MUTED))
        if rotate:
            ly = base + 14
            turn = f' transform="rotate(-35 {cx:.1f} {ly})"'
            label = _text(cx, ly, _fit(cat, 220), anchor="end", extra=turn)
        else:
            label = _text(cx, base + 16, cat, anchor="middle")
        out.append(f"<g><title>{_e(cat)}</title>{label}</g>")
    out.append(f'<line x1="{x0}" y1="{base}" x2="{x1}" y2="{base}" stroke="{MUTED}"/>')
    return out, PLOT_HEIGHT + label_h + 6


def _message(fig: go.Figure) -> str:
    notes = [str(a.text) for a in (fig.layout.annotations or ()) if a.text]
    return " ".join(notes) or "No data"


def figure_svg(fig: go.Figure) -> str | None:
    """``fig`` as an inline ``<svg>`` in a ``<figure class="ll-figure">``; None unless every trace is a bar.

    A figure without traces (the figures' annotated empty state) draws its title and message.
    """
    if any(t.type != "bar" for t in fig.data):
        return None
    title = str(fig.layout.title.text or "")
    parts = [_text(0, 18, title, extra=' font-size="16" font-weight="600"')] if title else []
    y = 30.0 if title else 6.0
    if not fig.data:
        parts.append(_text(WIDTH / 2, y + 40, _message(fig), anchor="middle", color=MUTED))
        height = y + 70
    else:
        c = _chart(fig)
        legend, legend_h = _legend(c.series, y + 10, 0, WIDTH)
        parts += legend
        body, body_h = (_horizontal if c.horizontal else _vertical)(c, y + legend_h + 8)
        parts += body
        height = y + legend_h + 8 + body_h + 6
    label = _e(title or "figure")
    return (
        f'<figure class="ll-figure" style="margin:8px 0 18px;padding:0;max-width:{WIDTH}px">'
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" width="100%" '
        f'role="img" aria-label="{label}" style="display:block;background:{GROUND};color:{INK};'
        f'font-family:{FONTS};font-size:{FONT}px"><rect width="{WIDTH}" height="{height:.0f}" '
        f'fill="{GROUND}"/>{"".join(parts)}</svg></figure>'
    )
