"""PIP-195 delayed-message buckets: analysis and figures over the ``bucket_snapshots`` inventory."""

from __future__ import annotations

from ledgerlens.buckets.analysis import (
    BucketView,
    MergePrediction,
    far_future_holders,
    memory_estimate,
    next_merge,
    subscription_view,
    subscriptions,
)
from ledgerlens.buckets.reads import ReadSummary, read_summary, unreadable_table

__all__ = [
    "BucketView",
    "MergePrediction",
    "ReadSummary",
    "far_future_holders",
    "memory_estimate",
    "next_merge",
    "read_summary",
    "subscription_view",
    "subscriptions",
    "unreadable_table",
]
