"""DataFrame plumbing shared by the rules and the pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame

__all__ = ["union_all"]


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of every frame (``unionByName``: columns matched by name); at least one frame."""
    if not frames:
        raise ValueError("union_all: no frames")
    return reduce(DataFrame.unionByName, frames)
