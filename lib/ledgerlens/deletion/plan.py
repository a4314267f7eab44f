"""Findings -> a deletion plan: what may be deleted, what state each item must still be in, one hash.

The plan is the only way into the deletion flow. It takes an audit's ``--out`` directory
(``findings.parquet``, ``summary.json``, ``inventory/``) and keeps only findings that are safe to
act on:

- kinds: ``orphan_ledger`` and ``orphan_offload_object`` by default; ``retention_overdue`` and
  ``offloaded_not_deleted`` on request (``load_topic``: the broker trims by its own rules).
  ``unattributed_ledger``, every ``foreign_*`` kind and every kind whose action is not
  ``delete_ledger``, ``delete_object`` or ``load_topic`` can never be planned, whatever is asked.
- never a ``critical`` finding, never a finding whose action does not match its kind (an orphan
  that a rule turned into ``investigate`` stays out), never an item whose tenant is not one of the
  audited Pulsar store's tenants (or an approved deleted tenant): a ledger or object of another
  cluster sharing the store is never a candidate.

Each item records the exact state the deleter must find again: the ledger znode's version and
BookKeeper custom metadata (from the audit's ``bk_ledgers`` inventory), each object's size and
ETag (from ``offload_objects``). ``plan_hash`` is the SHA-256 of the canonical JSON of everything
else in the plan; an approval names it, so an edited plan cannot be approved by mistake.
"""

from __future__ import annotations

import fnmatch
import getpass
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.deletion.plan_items import (
    Refusals,
    ledger_item,
    load_items,
    offload_items,
    remote_segment_items,
)
from ledgerlens.errors import ConfigError, LedgerLensError
from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.formats.references import owners_of
from ledgerlens.report.text import human_bytes
from ledgerlens.runtime.outdir import write_atomic
from ledgerlens.settings.config import parse_duration

PLAN_FORMAT = "ledgerlens-deletion-plan/1"

DELETE_KINDS: dict[str, str] = {"orphan_ledger": "delete_ledger", "orphan_offload_object": "delete_object"}
LOAD_KINDS: dict[str, str] = {"retention_overdue": "load_topic", "offloaded_not_deleted": "load_topic"}
# Kafka (KIP-405) objects no live segment metadata names; the finding's action is delete_object,
# the plan item's delete_remote_segment (the segment's objects together, re-verified against the
# Kafka metadata by ledgerlens.deletion.actions.delete_remote_segment).
KAFKA_KINDS: dict[str, str] = {
    "remote_segment_orphan_object": "delete_object",
    "remote_segment_deleted_partition_object": "delete_object",
}
PLANNABLE_KINDS: dict[str, str] = {**DELETE_KINDS, **LOAD_KINDS, **KAFKA_KINDS}
DEFAULT_KINDS: tuple[str, ...] = tuple(DELETE_KINDS)
KAFKA_DEFAULT_KINDS: tuple[str, ...] = tuple(KAFKA_KINDS)  # the default of a Kafka audit's findings
# Kinds that must never reach a plan, whatever --kinds says (plus every foreign_* kind).
NEVER_KINDS: frozenset[str] = frozenset({"unattributed_ledger", "remote_segment_foreign_object"})
ACTIONS: tuple[str, ...] = ("delete_ledger", "delete_object", "load_topic", "delete_remote_segment")


class PlanError(LedgerLensError):
    """A plan that cannot be made, read or trusted."""


def canonical(obj: Any) -> bytes:
    """The canonical JSON bytes hashed by plans and approvals (sorted keys, no spaces, UTF-8)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def plan_hash(plan: Mapping[str, Any]) -> str:
    """The hash of a plan: SHA-256 over the canonical JSON of every field but ``plan_hash``."""
    return sha256_hex(canonical({k: v for k, v in plan.items() if k != "plan_hash"}))


def is_never_plannable(kind: str) -> bool:
    """True for kinds no plan may hold (``unattributed_ledger``, ``foreign_*``)."""
    return kind in NEVER_KINDS or kind.startswith("foreign_")


# --- filters ---------------------------------------------------------------------------------------

_FILTER_RE = re.compile(r"^\s*(?P<col>[a-z_]+)\s*(?P<op>!=|>=|<=|=|~|>|<)\s*(?P<value>.*?)\s*$")
FILTER_COLUMNS = (
    "kind",
    "component",
    "tenant",
    "namespace",
    "managed_ledger",
    "cursor",
    "object_key",
    "ledger_id",
    "age_seconds",
    "bytes",
)
_ALIASES = {"age": "age_seconds", "size": "bytes"}
_NUMERIC = {"ledger_id", "age_seconds", "bytes"}
_SIZE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


@dataclass(frozen=True)
class Filter:
    """One ``column op value`` condition on a finding; ``~`` is a shell-style glob."""

    column: str
    op: str
    value: str | int

    def __str__(self) -> str:
        return f"{self.column}{self.op}{self.value}"

    def matches(self, row: Mapping[str, Any]) -> bool:
        got = row.get(self.column)
        if got is None:
            return self.op == "!="
        if self.column in _NUMERIC:
            g, v = int(got), int(self.value)
            return {
                "=": g == v,
                "!=": g != v,
                ">=": g >= v,
                "<=": g <= v,
                ">": g > v,
                "<": g < v,
                "~": False,
            }[self.op]
        s = str(got)
        if self.op == "=":
            return s == self.value
        if self.op == "!=":
            return s != self.value
        if self.op == "~":
            return fnmatch.fnmatchcase(s, str(self.value))
        raise PlanError(f"filter {self}: {self.op} needs a numeric column ({', '.join(sorted(_NUMERIC))})")


def parse_filter(text: str) -> Filter:
    """``tenant=ll-app``, ``namespace~ll-*/orders``, ``age>=24h``, ``bytes>=1GiB``, ``kind!=...``."""
    m = _FILTER_RE.match(text)
    if not m:
        raise ConfigError(f"filter {text!r}: expected COLUMN OP VALUE with OP one of = != ~ >= <= > <")
    col = _ALIASES.get(m["col"], m["col"])
    if col not in FILTER_COLUMNS:
        raise ConfigError(
            f"filter {text!r}: unknown column {m['col']!r} (one of {', '.join(FILTER_COLUMNS)})"
        )
    raw = m["value"]
    value: str | int = raw
    if col in _NUMERIC:
        if m["op"] == "~":
            raise ConfigError(f"filter {text!r}: ~ (glob) works on text columns only")
        if col == "age_seconds":
            value = parse_duration(raw)
        elif col == "bytes":
            sm = re.fullmatch(r"(\d+)\s*([kmgt]?i?b?)", raw.strip().lower())
            unit = sm[2] if sm else ""
            unit = {"k": "kib", "m": "mib", "g": "gib", "t": "tib", "kb": "kib", "mb": "mib"}.get(unit, unit)
            if not sm or unit not in _SIZE_UNITS:
                raise ConfigError(f"filter {text!r}: expected a size such as 1048576, 512MiB or 2GiB")
            value = int(sm[1]) * _SIZE_UNITS[unit]
        else:
            try:
                value = int(raw)
            except ValueError as e:
                raise ConfigError(f"filter {text!r}: {col} needs an integer") from e
    return Filter(col, m["op"], value)


# --- reading the audit -----------------------------------------------------------------------------


def _read_table(path: Path, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    import pyarrow.dataset as ds  # pyarrow: this module is imported by the CLI parser (--help)

    if not path.exists():
        return []
    dataset = ds.dataset(str(path), format="parquet")
    cols = [c for c in columns if c in dataset.schema.names] if columns else None
    return list(dataset.to_table(columns=cols).to_pylist())


def _files_digest(path: Path) -> str:
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    for p in files:
        h.update(p.relative_to(path).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


@dataclass
class AuditOutput:
    """What a plan needs from one audit run (its ``--out`` directory)."""

    out_dir: Path
    summary: dict[str, Any]
    findings: list[dict[str, Any]]
    findings_sha256: str

    @classmethod
    def read(cls, out_dir: str | Path) -> AuditOutput:
        out = Path(out_dir)
        findings_path = out / "findings.parquet"
        summary_path = out / "summary.json"
        if not findings_path.exists():
            raise PlanError(f"{findings_path}: not found; --findings must be an audit's --out directory")
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, ValueError) as e:
            raise PlanError(f"{summary_path}: cannot read the audit summary ({e})") from e
        if not isinstance(summary.get("as_of_ms"), int):
            raise PlanError(f"{summary_path}: no as_of_ms; is this an audit's summary.json?")
        if summary.get("suspected_wrong_root"):  # audit.gates: the audit may not have seen this cluster
            raise PlanError(
                f"{summary_path}: the audit suspects a wrong --ledgers-root or chroot "
                f"({summary['suspected_wrong_root'].get('message', '')}); audit again with the right one"
            )
        return cls(out, summary, _read_table(findings_path), _files_digest(findings_path))

    def inventory(self, table: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        return _read_table(self.out_dir / "inventory" / table, columns)

    def has_inventory(self, table: str) -> bool:
        return (self.out_dir / "inventory" / table).exists()


def _tenant_of(row: Mapping[str, Any]) -> str | None:
    if row.get("tenant"):
        return str(row["tenant"])
    ml = row.get("managed_ledger")
    if ml:
        try:
            return parse_managed_ledger(str(ml)).tenant
        except LedgerLensError:
            return None
    return None


def audited_tenants(audit: AuditOutput) -> set[str]:
    """Tenants the audited Pulsar store(s) hold (the audit's ownership rule): ``pulsar_tenants`` when
    present, namespace policies, managed-ledger nodes and schema locators."""
    tenants: set[str] = set()
    for table in ("pulsar_tenants", "namespace_policies", "managed_ledgers", "schema_ledgers"):
        tenants |= {str(r["tenant"]) for r in audit.inventory(table, ["tenant"]) if r.get("tenant")}
    return tenants


def deleted_tenants(summary: Mapping[str, Any]) -> list[str]:
    """Tenants the audit was told were deleted on purpose (``--deleted-tenant``), if it recorded them."""
    got = summary.get("deleted_tenants") or []
    return sorted({str(t) for t in got if t})


# --- building --------------------------------------------------------------------------------------


def unprovable_owners(audit: AuditOutput) -> dict[str, str]:
    """Managed ledgers whose references the audit could not know: name -> the node and why.

    A node that did not decode or could not be read (``error``, its cursors' too), and a node
    emptied by an edit (0 bytes, rewritten): whatever they own is ``investigate``, never planned.
    """
    out: dict[str, str] = {}
    for table in ("managed_ledgers", "cursors"):
        if not audit.has_inventory(table):
            continue
        cols = ["managed_ledger", "path", "error"] + (
            ["compression", "znode_version"] if table == "managed_ledgers" else []
        )
        for r in audit.inventory(table, cols):
            ml = r.get("managed_ledger")
            if not ml:
                continue
            if r.get("error"):
                out.setdefault(str(ml), f"{r.get('path')}: {r['error']}")
            elif r.get("compression") == "EMPTY" and int(r.get("znode_version") or 0) > 0:
                out.setdefault(str(ml), f"{r.get('path')}: emptied (0 bytes, rewritten)")
    return out


def _unprovable(names: Iterable[str], unprovable: Mapping[str, str]) -> str | None:
    for n in sorted(names):
        for key, why in unprovable.items():
            if n == key or n.startswith(key.rstrip("/") + "/"):
                return f"unprovable: the references of {key} are unknown ({why})"
    return None


def _wanted_kinds(kinds: Iterable[str] | None, kafka: bool) -> tuple[str, ...]:
    """The kinds to plan: those asked for (each plannable) or the defaults of the audited system."""
    wanted = tuple(dict.fromkeys(kinds)) if kinds else (KAFKA_DEFAULT_KINDS if kafka else DEFAULT_KINDS)
    for k in wanted:
        if is_never_plannable(k):
            raise PlanError(
                f"kind {k}: never a deletion candidate (it may belong to another cluster or to nobody)"
            )
        if k not in PLANNABLE_KINDS:
            raise PlanError(f"kind {k}: not plannable; plannable kinds: {', '.join(PLANNABLE_KINDS)}")
    return wanted


def _candidate(
    row: Mapping[str, Any], kind: str, tenants: set[str], deleted: Sequence[str], refuse: Refusals
) -> dict[str, Any] | None:
    """A finding of a wanted kind as a candidate (with its tenant), or None (refused)."""
    if row.get("severity") == "critical":
        refuse.add(row, "critical finding")
        return None
    if row.get("action") != PLANNABLE_KINDS[kind]:
        refuse.add(
            row,
            f"action is {row.get('action')!r}, not {PLANNABLE_KINDS[kind]!r}",
            investigate=row.get("action") == "investigate",
        )
        return None
    if kind in KAFKA_KINDS:  # ownership: the audit found the topic id in this cluster's metadata
        return dict(row)
    tenant = _tenant_of(row)
    if not tenant:
        refuse.add(row, "tenant unknown: ownership by the audited cluster not proven")
        return None
    if tenant not in tenants and tenant not in deleted:
        refuse.add(row, f"tenant {tenant!r} is not in the audited Pulsar store (another cluster's?)")
        return None
    return {**row, "tenant": tenant}


def _candidates(
    audit: AuditOutput,
    wanted: Sequence[str],
    flt: Sequence[Filter],
    deleted: Sequence[str],
    refuse: Refusals,
) -> dict[str, list[dict[str, Any]]]:
    """The findings of each wanted kind that meet every filter and may be planned."""
    tenants = audited_tenants(audit)
    candidates: dict[str, list[dict[str, Any]]] = {k: [] for k in wanted}
    for row in audit.findings:
        kind = str(row.get("kind"))
        if kind not in candidates:
            continue
        if is_never_plannable(kind):  # belt and braces: never, even if a future kind list slips
            continue
        if not all(f.matches(row) for f in flt):
            continue
        candidate = _candidate(row, kind, tenants, deleted, refuse)
        if candidate is not None:
            candidates[kind].append(candidate)
    return candidates


_BK_COLUMNS = [
    "ledger_id",
    "path",
    "znode_version",
    "custom_metadata",
    "ctime_ms",
    "length",
    "state",
    "error",
]


def _orphan_ledger_items(
    audit: AuditOutput, rows: Sequence[Mapping[str, Any]], unprovable: Mapping[str, str], refuse: Refusals
) -> list[dict[str, Any]]:
    """``delete_ledger`` items of orphan ledgers whose owners' references are all known."""
    ids = {int(r["ledger_id"]) for r in rows if r.get("ledger_id") is not None}
    bk = {
        int(r["ledger_id"]): r
        for r in audit.inventory("bk_ledgers", _BK_COLUMNS)
        if r.get("ledger_id") is not None and int(r["ledger_id"]) in ids
    }
    items = []
    for row in rows:
        bk_row = bk.get(int(row["ledger_id"])) if row.get("ledger_id") is not None else None
        item = ledger_item(row, bk_row, refuse)
        if item is None:
            continue
        mls, _ = owners_of(item["expected"]["custom_metadata"])
        why = _unprovable(
            mls | ({str(row["managed_ledger"])} if row.get("managed_ledger") else set()), unprovable
        )
        if why:
            refuse.add(row, why, investigate=True)
            continue
        items.append(item)
    return items


def _orphan_object_items(
    audit: AuditOutput, rows: Sequence[Mapping[str, Any]], unprovable: Mapping[str, str], refuse: Refusals
) -> list[dict[str, Any]]:
    """``delete_object`` items of orphan offload copies: never an only copy of a live managed ledger."""
    keys = {str(r["object_key"]) for r in rows if r.get("object_key")}
    objs = {
        str(r["key"]): r
        for r in audit.inventory("offload_objects", ["bucket", "key", "size", "etag", "role"])
        if r.get("key") in keys
    }
    copies = offload_items(rows, objs, None, refuse)
    mls_known = {
        str(r["managed_ledger"])
        for r in audit.inventory("managed_ledgers", ["managed_ledger"])
        if r.get("managed_ledger")
    }
    lids = {c["expected"]["ledger_id"] for c in copies if c["expected"].get("ledger_id") is not None}
    in_bk = {
        int(r["ledger_id"])
        for r in audit.inventory("bk_ledgers", ["ledger_id"])
        if r.get("ledger_id") is not None and int(r["ledger_id"]) in lids
    }
    items = []
    for c in copies:
        ml, lid = c["expected"].get("managed_ledger"), c["expected"].get("ledger_id")
        why = _unprovable([str(ml)], unprovable) if ml else None
        if not why and ml in mls_known and (lid is None or lid not in in_bk):
            why = (
                f"only copy: no BookKeeper copy of the data while managed ledger {ml} exists; "
                "deleted only once the managed ledger is proven deleted"
            )
        if why:
            for f in c["findings"]:
                refuse.add(f, why, investigate=True)
            continue
        items.append(c)
    return items


def _plan_items(
    audit: AuditOutput, candidates: Mapping[str, list[dict[str, Any]]], refuse: Refusals
) -> list[dict[str, Any]]:
    """The plan's items of every kind, ordered by action then item id (ids unique)."""
    unprovable = unprovable_owners(audit)
    items: list[dict[str, Any]] = []
    if candidates.get("orphan_ledger"):
        items.extend(_orphan_ledger_items(audit, candidates["orphan_ledger"], unprovable, refuse))
    if candidates.get("orphan_offload_object"):
        items.extend(_orphan_object_items(audit, candidates["orphan_offload_object"], unprovable, refuse))
    loads = [r for k in LOAD_KINDS for r in candidates.get(k, [])]
    if loads:
        items.extend(load_items(loads, refuse))
    remote = [r for k in KAFKA_KINDS for r in candidates.get(k, [])]
    if remote:
        items.extend(remote_segment_items(remote, refuse))
    items.sort(key=lambda i: (ACTIONS.index(i["action"]), i["item_id"]))
    ids_seen = [i["item_id"] for i in items]
    if len(ids_seen) != len(set(ids_seen)):
        raise PlanError("two plan items share an item id; the findings hold duplicates")
    return items


def build_plan(
    findings_dir: str | Path,
    *,
    kinds: Iterable[str] | None = None,
    filters: Iterable[str | Filter] = (),
    now_ms: int | None = None,
    planned_by: str | None = None,
) -> dict[str, Any]:
    """The deletion plan of an audit's output directory (a JSON-ready dict with ``plan_hash``).

    Parameters
    ----------
    findings_dir
        An audit's ``--out``: ``findings.parquet``, ``summary.json`` and ``inventory/``.
    kinds
        Finding kinds to plan (default ``orphan_ledger``, ``orphan_offload_object``); asking for a
        kind that can never be planned is an error.
    filters
        Conditions every planned finding must meet (:func:`parse_filter`), all of them.
    """
    audit = AuditOutput.read(findings_dir)
    wanted = _wanted_kinds(kinds, audit.summary.get("system") == "kafka")
    flt = [f if isinstance(f, Filter) else parse_filter(f) for f in filters]
    deleted = deleted_tenants(audit.summary)
    refuse = Refusals([])
    items = _plan_items(audit, _candidates(audit, wanted, flt, deleted, refuse), refuse)
    totals: dict[str, Any] = {"items": len(items), "bytes": sum(int(i.get("bytes") or 0) for i in items)}
    for a in ACTIONS:
        totals[a] = sum(1 for i in items if i["action"] == a)
    plan: dict[str, Any] = {
        "format": PLAN_FORMAT,
        "created_ms": int(time.time() * 1000) if now_ms is None else int(now_ms),
        "as_of_ms": int(audit.summary["as_of_ms"]),
        "auditor": audit.summary.get("auditor"),
        "planned_by": planned_by or _user(),
        "findings": {"dir": str(audit.out_dir.resolve()), "sha256": audit.findings_sha256},
        "cluster_name": audit.summary.get("cluster_name"),
        "deleted_tenants": deleted,
        # the Pulsar metadata stores the audit read: the deleter must read as many for references
        "pulsar_stores": [
            str(p.get("location")) for p in (audit.summary.get("sources") or {}).get("pulsar") or []
        ],
        "kinds": list(wanted),
        "filters": [str(f) for f in flt],
        "totals": totals,
        "items": items,
        "refused": sorted(refuse.rows, key=lambda r: json.dumps(r, sort_keys=True, default=str)),
    }
    plan["plan_hash"] = plan_hash(plan)
    return plan


def _user() -> str:
    try:
        return os.environ.get("LEDGERLENS_USER") or getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def write_json(document: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``document`` as JSON atomically (temporary file, then rename)."""
    target = Path(path)
    write_atomic(target, json.dumps(document, indent=1, sort_keys=True, default=str) + "\n")
    return target


def read_json(path: Path, what: str, error: type[LedgerLensError]) -> Any:
    """The JSON document at ``path``; ``error`` (naming the ``what``) when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise error(f"{path}: cannot read the {what} ({e})") from e


def write_plan(plan: Mapping[str, Any], path: str | Path) -> Path:
    """Write ``plan.json`` atomically (temporary file, then rename)."""
    return write_json(plan, path)


def read_plan(path: str | Path) -> dict[str, Any]:
    """A plan read back, with its hash checked against its content."""
    p = Path(path)
    plan = read_json(p, "plan", PlanError)
    if not isinstance(plan, dict) or plan.get("format") != PLAN_FORMAT:
        raise PlanError(f"{p}: not a ledgerlens deletion plan (format {plan.get('format')!r})")
    recorded, actual = plan.get("plan_hash"), plan_hash(plan)
    if recorded != actual:
        raise PlanError(
            f"{p}: content was changed after planning (plan_hash {recorded}, content hashes to {actual})"
        )
    return plan


def format_plan(plan: Mapping[str, Any]) -> str:
    """A short human summary of a plan."""
    t = plan["totals"]
    lines = [
        f"plan {plan['plan_hash']}",
        f"  {t['items']} items, {human_bytes(t['bytes'])}: {t['delete_ledger']} ledgers, "
        f"{t['delete_object']} offload copies, {t['load_topic']} topics to load"
        + (f", {t['delete_remote_segment']} Kafka remote segments" if t.get("delete_remote_segment") else ""),
    ]
    if plan.get("refused"):
        reasons: dict[str, int] = {}
        for r in plan["refused"]:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
        lines.append(f"  {len(plan['refused'])} findings left out:")
        lines += [f"    {n:>6}  {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)
