"""DataFrame plumbing shared by the rules and the pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["Look", "firsts", "renamed", "union_all"]


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of every frame (``unionByName``: columns matched by name); at least one frame."""
    if not frames:
        raise ValueError("union_all: no frames")
    return reduce(DataFrame.unionByName, frames)


def renamed(**names: str) -> list[Column]:
    """A select's renamed columns, in the order given: ``new="old"`` reads column ``old`` as ``new``."""
    return [F.col(old).alias(new) for new, old in names.items()]


def firsts(*names: str) -> list[Column]:
    """The aggregates ``first(c) AS c`` of the columns ``names`` (one value per group)."""
    return [F.first(c).alias(c) for c in names]


@dataclass(frozen=True)
class Look:
    """The rows of one inventory table where ``where`` holds, under ``name``, with an optional
    ``value`` (a string column). Looks are declared next to the rule that reads those rows; the
    audit's facts job (``audit.facts``) reads every look of a table in one pass."""

    table: str
    name: str
    where: Column
    value: Column | None = None
