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

__all__ = [
    "BucketView",
    "MergePrediction",
    "far_future_holders",
    "memory_estimate",
    "next_merge",
    "subscription_view",
    "subscriptions",
]
