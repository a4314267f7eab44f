"""Figures of the Kafka runbook: pure functions from pandas frames to plotly figures (house template)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ledgerlens.report.figures import TEMPLATE
from ledgerlens.report.text import human_bytes

__all__ = ["STATE_COLORS", "segment_timeline"]

STATE_COLORS = {
    "COPY_SEGMENT_STARTED": "#f0ad4e",
    "COPY_SEGMENT_FINISHED": "#5cb85c",
    "DELETE_SEGMENT_STARTED": "#d9534f",
    "DELETE_SEGMENT_FINISHED": "#bbbbbb",
}


def segment_timeline(segments: pd.DataFrame, *, include_deleted: bool = False, top: int = 40) -> go.Figure:
    """Per-partition offset timeline of remote segments, one bar per segment, coloured by state.

    ``segments`` has the REMOTE_SEGMENTS columns. Rows are ``topic-partition`` (the ``top``
    partitions with the most live segments); bars span ``[start_offset, end_offset]``.
    DELETE_SEGMENT_FINISHED segments are left out unless ``include_deleted``.
    """
    title = "Remote log segments by offset and state"
    d = segments if include_deleted else segments[segments["state"] != "DELETE_SEGMENT_FINISHED"]
    fig = go.Figure(layout={"template": TEMPLATE, "title": {"text": title}, "barmode": "overlay"})
    if d.empty:
        fig.add_annotation(
            text="no remote segments", showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper"
        )
        return fig
    d = d.assign(row=d["topic"].astype(str) + "-" + d["partition"].astype(str))
    keep = d["row"].value_counts().head(top).index
    d = d[d["row"].isin(keep)].sort_values(["row", "start_offset"])
    for state, color in STATE_COLORS.items():
        s = d[d["state"] == state]
        if s.empty:
            continue
        fig.add_trace(
            go.Bar(
                name=state,
                orientation="h",
                y=s["row"],
                base=s["start_offset"],
                x=s["end_offset"] - s["start_offset"] + 1,
                marker={"color": color},
                customdata=list(
                    zip(
                        s["segment_id"],
                        s["end_offset"],
                        [human_bytes(b) for b in s["segment_size"]],
                        strict=True,
                    )
                ),
                hovertemplate="%{y}<br>offsets %{base} - %{customdata[1]}<br>segment %{customdata[0]}"
                "<br>%{customdata[2]}<extra>" + state + "</extra>",
            )
        )
    fig.update_layout(
        xaxis_title="offset", yaxis={"categoryorder": "category descending"}, legend_title="state"
    )
    return fig
