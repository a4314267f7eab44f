"""What changed since the last run: ``first_seen`` and ``new`` on every finding, the findings
resolved since the previous run, and the ``history/`` of an output directory.

A finding is the same finding in two runs when its identity (``schemas.FINDING_IDENTITY``: the
finding keys without ``severity``) is equal, nulls equal to nulls.

The previous run is, in this order: ``--previous DIR`` (an audit's output directory, or one entry
of a ``history/``); the run published in the output directory itself (schedulers reuse ``--out``);
the newest entry of its ``history/``. A previous run that cannot be read, or that audited another
cluster, is not compared: one warning line on stderr, ``previous_note`` in ``summary.json``, and
the run goes on as a first run.

``history/`` keeps the last N runs (``--history-keep``, default 14; 0: none written): one
directory per run, named by when it was recorded, holding the slim findings
(``schemas.FINDINGS_HISTORY``) as ``findings.parquet`` and the summary counts as
``summary.json``, so an entry is itself a valid ``--previous DIR``; the newest entry also keeps the
run's offload verdicts (``offload_verdicts.parquet``, ``ledgerlens.offload.verdicts``), older ones
drop them. Each entry is written whole (a temporary directory renamed into place).

Pure pyarrow / pandas: no Spark session is needed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.pandas.types import to_arrow_schema

from ledgerlens.errors import ConfigError
from ledgerlens.inventory import schemas
from ledgerlens.offload.verdicts import VERDICTS_NAME

__all__ = [
    "DEFAULT_KEEP",
    "HISTORY_DIR",
    "RESOLVED_NAME",
    "Comparison",
    "HistoryOptions",
    "Lookup",
    "Previous",
    "annotate_parquet",
    "discover",
    "entries",
    "identity_keys",
    "other_cluster",
    "prune",
    "read_previous",
    "record",
    "write_resolved",
]

HISTORY_DIR = "history"
RESOLVED_NAME = "resolved.parquet"
FINDINGS_NAME = "findings.parquet"
SUMMARY_NAME = "summary.json"
DEFAULT_KEEP = 14

PUBLISHED_ARROW = to_arrow_schema(schemas.FINDINGS_PUBLISHED)
HISTORY_ARROW = to_arrow_schema(schemas.FINDINGS_HISTORY)
RESOLVED_ARROW = to_arrow_schema(schemas.RESOLVED)

# What a history entry keeps of its run's summary: enough to compare with it and to draw a trend.
ENTRY_SUMMARY_KEYS = (
    "as_of_ms",
    "system",
    "cluster_name",
    "sources",
    "store",
    "total_findings",
    "counts_by_severity",
    "bytes_by_severity",
    "counts_by_kind",
    "new_total",
    "new_by_severity",
    "resolved_total",
    "resolved_by_severity",
)

# An identity column's null, distinct from "" and from any name: control characters are not allowed
# in metadata-store paths. Not NUL: pandas' hash tables end strings there.
_NULL = "\x1e"
_SEP = "\x1f"


@dataclass(frozen=True)
class HistoryOptions:
    """Where the previous run is (None: found in the output directory) and how many runs to keep."""

    previous: Path | None = None
    keep: int = DEFAULT_KEEP

    @classmethod
    def of(cls, previous: str | Path | None, keep: int | str | None) -> HistoryOptions:
        """From settings (``audit.previous``, ``audit.history-keep``); empty values are defaults."""
        try:
            n = DEFAULT_KEEP if keep is None or str(keep).strip() == "" else int(str(keep).strip())
        except ValueError:
            raise ConfigError(f"--history-keep must be a number of runs, not {keep!r}") from None
        if n < 0:
            raise ConfigError(f"--history-keep must be 0 (no history) or more, not {n}")
        where = Path(previous).expanduser().resolve() if previous else None
        if where is not None and not where.is_dir():
            raise ConfigError(
                f"--previous {previous}: not a directory (an audit's --out, or a history/ entry)"
            )
        return cls(where, n)

    @classmethod
    def from_context(cls, context: Mapping[str, Any] | None) -> HistoryOptions:
        """From the resolved settings recorded in ``context`` (``contexts.Settings.public()``), so
        the runbook honours ``audit.previous`` / ``audit.history-keep`` from a context file, the
        environment or ``ledgerlens report``'s flags without passing them."""
        settings = (context or {}).get("settings") or {}

        def value(key: str) -> Any:
            cell = settings.get(key)
            return cell.get("value") if isinstance(cell, Mapping) else None

        return cls.of(value("audit.previous") or None, value("audit.history-keep"))


@dataclass(frozen=True)
class Previous:
    """The run this one is compared with."""

    source: str  # the output directory or history entry it was read from
    as_of_ms: int
    summary: dict[str, Any]
    findings: pa.Table  # HISTORY_ARROW columns


@dataclass(frozen=True)
class Lookup:
    """The previous run found (None: none, or none usable) and, when one was found but not
    compared, why (``note``: the warning line, recorded as ``previous_note``)."""

    previous: Previous | None
    note: str | None = None


def entries(history: Path) -> list[Path]:
    """The entries of a ``history/`` directory, oldest first (hidden temporary ones left out)."""
    try:
        return sorted(p for p in history.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []


def _candidate(out: Path, options: HistoryOptions) -> Path | None:
    if options.previous is not None:
        return options.previous
    if (out / FINDINGS_NAME).exists() or (out / SUMMARY_NAME).exists():
        return out
    found = entries(out / HISTORY_DIR)
    return found[-1] if found else None


def read_previous(where: Path) -> Previous:
    """The run published in ``where`` (``findings.parquet`` and ``summary.json``).

    Raises ``ValueError`` (one line) when it cannot be read. Findings of a run that recorded no
    ``first_seen`` (an older release) were first seen at that run's as-of.
    """
    try:
        summary = json.loads((where / SUMMARY_NAME).read_text(encoding="utf-8"))
        as_of = summary.get("as_of_ms") if isinstance(summary, dict) else None
        if not isinstance(as_of, int) or isinstance(as_of, bool):
            raise ValueError(f"{SUMMARY_NAME} has no as_of_ms")
        path = where / FINDINGS_NAME
        if not path.exists():
            raise ValueError(f"{FINDINGS_NAME} is missing")
        names = set(pq.ParquetDataset(str(path)).schema.names)
        wanted = [c for c in schemas.columns(schemas.FINDINGS_HISTORY) if c in names]
        table = pq.read_table(str(path), columns=wanted)
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError, pa.ArrowException) as e:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(text) from e
    if "first_seen" not in table.column_names:
        table = table.append_column("first_seen", pa.array([as_of] * table.num_rows, pa.int64()))
    missing = [c for c in schemas.columns(schemas.FINDINGS_HISTORY) if c not in table.column_names]
    if missing:
        raise ValueError(f"{FINDINGS_NAME} lacks {', '.join(missing)}")
    try:
        table = table.select(schemas.columns(schemas.FINDINGS_HISTORY)).cast(HISTORY_ARROW)
    except (pa.ArrowException, ValueError) as e:
        raise ValueError(f"{FINDINGS_NAME}: {e}") from e
    first = pc.fill_null(table.column("first_seen"), as_of)
    table = table.set_column(table.schema.get_field_index("first_seen"), "first_seen", first)
    return Previous(str(where), as_of, summary, table)


def _locations(summary: Mapping[str, Any]) -> list[str]:
    """Where a run's data came from: the Kafka store, else the BookKeeper metadata store."""
    if summary.get("store"):
        return [str(summary["store"])]
    sources = summary.get("sources")
    bk = sources.get("bookkeeper") if isinstance(sources, Mapping) else None
    location = bk.get("location") if isinstance(bk, Mapping) else None
    return [str(location)] if location else []


def other_cluster(previous: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """Why ``previous`` (a run's summary) audited another cluster than ``current``, or None.

    Cluster names decide when both runs know theirs; else the stores they read, when both say.
    """
    ps, cs = previous.get("system") or "pulsar", current.get("system") or "pulsar"
    if ps != cs:
        return f"it audited {ps}, this run audits {cs}"
    pn, cn = previous.get("cluster_name"), current.get("cluster_name")
    if pn and cn:
        return None if pn == cn else f"it audited cluster {pn}, this run audits {cn}"
    pl, cl = _locations(previous), _locations(current)
    if pl and cl and pl != cl:
        return f"it read {', '.join(pl)}, this run reads {', '.join(cl)}"
    return None


def discover(out: Path, options: HistoryOptions, current: Mapping[str, Any]) -> Lookup:
    """The previous run for a run publishing into ``out`` that audits ``current`` (a summary's
    ``system``, ``cluster_name``, ``sources`` / ``store``): ``options.previous``, else the run
    published in ``out``, else the newest entry of ``out/history``."""
    where = _candidate(out, options)
    if where is None:
        return Lookup(None)
    try:
        previous = read_previous(where)
    except ValueError as e:
        return Lookup(None, f"previous run {where} not compared: cannot read it ({e})")
    why = other_cluster(previous.summary, current)
    if why is not None:
        return Lookup(None, f"previous run {where} not compared: {why}")
    return Lookup(previous)


def warn(lookup: Lookup) -> None:
    """The lookup's note as one warning line on stderr (nothing when there is none)."""
    if lookup.note:
        print(f"ledgerlens: warning: {lookup.note}", file=sys.stderr, flush=True)


def identity_keys(table: pa.Table) -> np.ndarray:
    """One text per row: its ``schemas.FINDING_IDENTITY`` values (nulls kept apart from "")."""
    parts = []
    for name in schemas.FINDING_IDENTITY:
        col = table.column(name)
        if name == "ledger_id" and not pa.types.is_integer(col.type):
            col = pc.cast(col, pa.int64())  # a float column written by pandas: 12.0 is ledger 12
        parts.append(pc.fill_null(pc.cast(col, pa.string()), _NULL))
    if table.num_rows == 0:
        return np.array([], dtype=object)
    return np.asarray(pc.binary_join_element_wise(*parts, _SEP).to_numpy(zero_copy_only=False), dtype=object)


def _by_severity(severity: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    counts = dict.fromkeys(schemas.SEVERITIES, 0)
    for cell in pc.value_counts(severity).to_pylist():
        if cell["values"] in counts:
            counts[cell["values"]] += int(cell["counts"])
    return counts


class Comparison:
    """This run's findings against the previous run's, fed in batches (:meth:`annotate`)."""

    def __init__(self, previous: Previous | None, as_of_ms: int) -> None:
        self.previous = previous
        self.as_of_ms = int(as_of_ms)
        self._first: pd.Series | None = None
        if previous is not None:
            frame = pd.DataFrame(
                {
                    "key": identity_keys(previous.findings),
                    "first_seen": previous.findings.column("first_seen").to_numpy(),
                }
            )
            self._first = frame.groupby("key", sort=False)["first_seen"].min()
        self._keys: list[np.ndarray] = []
        self._slim: list[pa.Table] = []
        self._new = dict.fromkeys(schemas.SEVERITIES, 0)

    def annotate(self, table: pa.Table) -> pa.Table:
        """``table`` (findings) with ``first_seen`` and ``new`` appended; remembered for the
        resolved findings, the counts and the history entry."""
        keys = identity_keys(table)
        n = len(keys)
        if self._first is None or len(self._first) == 0 or n == 0:
            first = np.full(n, self.as_of_ms, dtype=np.int64)
            new = np.ones(n, dtype=bool)
        else:
            at = self._first.index.get_indexer(keys)
            new = at < 0
            carried = self._first.to_numpy(dtype=np.int64)[np.where(new, 0, at)]
            # a previous run of a later as-of (a forensic audit of the past) never moves it forward
            first = np.where(new, self.as_of_ms, np.minimum(carried, self.as_of_ms)).astype(np.int64)
        out = table.append_column("first_seen", pa.array(first, pa.int64()))
        out = out.append_column("new", pa.array(new, pa.bool_()))
        self._keys.append(keys)
        self._slim.append(out.select(schemas.columns(schemas.FINDINGS_HISTORY)).cast(HISTORY_ARROW))
        for severity, count in _by_severity(out.filter(pa.array(new)).column("severity")).items():
            self._new[severity] += count
        return out

    def slim(self) -> pa.Table:
        """Every annotated finding as ``schemas.FINDINGS_HISTORY`` rows (a history entry)."""
        return pa.concat_tables(self._slim) if self._slim else HISTORY_ARROW.empty_table()

    def resolved(self) -> pa.Table:
        """The previous run's findings that no annotated finding matches (``schemas.RESOLVED``)."""
        if self.previous is None:
            return RESOLVED_ARROW.empty_table()
        prev = self.previous.findings
        seen = np.concatenate(self._keys) if self._keys else np.array([], dtype=object)
        keep = ~pd.Series(identity_keys(prev), dtype=object).isin(pd.Index(seen, dtype=object)).to_numpy()
        out = prev.filter(pa.array(keep, pa.bool_()))
        out = out.append_column("last_seen", pa.array([self.previous.as_of_ms] * out.num_rows, pa.int64()))
        return out.cast(RESOLVED_ARROW)

    def summary(self) -> dict[str, Any]:
        """The ``summary.json`` keys: ``previous``, ``new_*`` and ``resolved_*``."""
        resolved = self.resolved()
        by = _by_severity(resolved.column("severity"))
        previous = self.previous
        return {
            "previous": None
            if previous is None
            else {"as_of_ms": previous.as_of_ms, "source": previous.source},
            "new_by_severity": dict(self._new),
            "new_total": sum(self._new.values()),
            "resolved_by_severity": by,
            "resolved_total": sum(by.values()),
        }


def annotate_parquet(path: Path, comparison: Comparison) -> None:
    """Append ``first_seen`` and ``new`` to the findings Spark wrote under ``path`` (a directory
    of Parquet parts), batch by batch into one new part that replaces them."""
    parts = sorted(p for p in path.glob("*.parquet") if not p.name.startswith((".", "_")))
    tmp = path / ".ledgerlens-annotated.parquet"
    with pq.ParquetWriter(str(tmp), PUBLISHED_ARROW, compression="zstd") as writer:
        for part in parts:
            for batch in pq.ParquetFile(str(part)).iter_batches(batch_size=65_536):
                table = pa.Table.from_batches([batch])
                writer.write_table(comparison.annotate(table).cast(PUBLISHED_ARROW))
    for part in parts:
        part.unlink()
        (path / f".{part.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum of the part
    os.replace(tmp, path / "part-00000.zstd.parquet")


def write_resolved(out: Path, comparison: Comparison) -> Path:
    """``out/resolved.parquet``: the previous run's findings this run does not report."""
    target = out / RESOLVED_NAME
    pq.write_table(comparison.resolved(), str(target), compression="zstd")
    return target


def record(directory: Path, summary: Mapping[str, Any], comparison: Comparison, keep: int) -> Path | None:
    """This run as a new entry of ``directory/history`` (none when ``keep`` is 0), written whole."""
    if keep <= 0:
        return None
    history = directory / HISTORY_DIR
    history.mkdir(parents=True, exist_ok=True)
    name = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    tmp = history / f".tmp-{name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    pq.write_table(comparison.slim(), str(tmp / FINDINGS_NAME), compression="zstd")
    kept = {k: summary[k] for k in ENTRY_SUMMARY_KEYS if k in summary}
    kept["system"] = summary.get("system") or "pulsar"
    (tmp / SUMMARY_NAME).write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    _keep_verdicts(directory / VERDICTS_NAME, tmp / VERDICTS_NAME)
    target = history / name
    os.replace(tmp, target)
    return target


def _keep_verdicts(source: Path, target: Path) -> None:
    """The run's offload verdicts (a Parquet directory) into its history entry: hard links (no
    second copy on disk), else a copy."""
    if not source.is_dir():
        return
    target.mkdir()
    for f in source.iterdir():
        if f.is_file() and not f.name.startswith((".", "_")):
            try:
                os.link(f, target / f.name)
            except OSError:
                shutil.copy2(f, target / f.name)


def prune(history: Path, keep: int) -> list[str]:
    """Remove all but the newest ``keep`` entries of ``history`` and stale temporary entries, and
    the offload verdicts of all but the newest; ``keep`` 0 leaves the directory alone (history
    disabled). Returns the removed names."""
    if keep <= 0 or not history.is_dir():
        return []
    removed = [p for p in history.iterdir() if p.name.startswith(".tmp-") and p.is_dir()]
    removed += entries(history)[:-keep]
    for p in removed:
        shutil.rmtree(p, ignore_errors=True)
    for p in entries(history)[:-1]:  # slim entries: only the newest keeps the offload verdicts
        shutil.rmtree(p / VERDICTS_NAME, ignore_errors=True)
    return sorted(p.name for p in removed)
