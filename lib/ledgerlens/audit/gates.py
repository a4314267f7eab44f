"""Plausibility gates: prove the audit looks at a Pulsar cluster before any finding is written.

A wrong chroot, a mistyped ``--ledgers-root`` or a bucket shared with another cluster all look,
to the rules, like a cluster whose storage is full of orphans or whose metadata points at nothing.
These gates refuse such inputs (``ImplausibleInputError``, one line naming what looks wrong and
how to override knowingly) or, for the share of missing ledgers, mark the run as a suspected wrong
root instead of paging. Thresholds: docs/audit-rules.md, "Plausibility gates".

- ``check_structure`` (before Spark, on a kazoo client; ``check_snapshot_structure`` on a ZooKeeper
  data directory), for each metadata store and the roles it holds: the chroot exists; the
  ledgers root has the nodes every BookKeeper cluster writes (``LAYOUT``, written by the first
  client, and ``available``, where bookies register; not ``INSTANCEID``: only ``initnewcluster``
  writes it, and a Pulsar standalone never does); the managed-ledger root exists.
- ``check_admin_structure`` (before Spark, through a Pulsar admin API: ``--source admin``,
  ``admin:URL`` stores): counts its tenants, namespaces and topics (the managed ledgers it would
  read), so that the bucket gate below judges it as it judges a metadata store.
- ``check_inventory`` (after collection): no managed ledgers next to a non-empty bucket or
  Pulsar ledgers in BookKeeper is refused.
- ``wrong_root_suspicion`` (after the rules): more than ``MISSING_SHARE`` of the referenced
  ledgers and more than ``MISSING_MIN`` ledgers missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ledgerlens.audit.frames import Look, union_all
from ledgerlens.errors import LedgerLensError, SourceError
from ledgerlens.report.kinds import declared
from ledgerlens.settings.config import ZooKeeperSource
from ledgerlens.sources.admin_client import AdminAuthError, _ns_api, _q

BOOKKEEPER_NODES = ("LAYOUT", "available")
MISSING_SHARE = 0.05  # of the distinct ledgers the metadata references
MISSING_MIN = 10  # distinct missing ledgers
OVERRIDE = "--allow-empty-metadata"
AUTH_HINT = (
    "configure ZooKeeper authentication for ledgerlens (digest or SASL credentials and TLS from a "
    "config file or the environment, never command-line parameters)"
)


class ImplausibleInputError(LedgerLensError):
    """The inputs do not look like one Pulsar cluster (wrong chroot, root, bucket)."""


def _override(allow: bool) -> str:
    return "" if allow else f" (if this is really intended, pass {OVERRIDE})"


def check_structure(
    client: Any,
    zk: ZooKeeperSource,
    *,
    bookkeeper: bool = True,
    pulsar: bool = True,
    allow_empty_metadata: bool = False,
    option: str = "--zookeeper",
) -> dict[str, Any]:
    """Check the chroot, the ledgers root and the managed-ledger root on a started kazoo client.

    ``bookkeeper`` / ``pulsar``: which metadata the store holds (a store named by
    ``--bookkeeper-metadata`` holds only BookKeeper's, ``--pulsar-metadata`` only Pulsar's).
    ``option`` names the setting that gave the store (for the hint). Returns what was seen
    (``judge_structure``).
    """
    from kazoo.exceptions import NoAuthError  # kazoo: only with a live ZooKeeper

    where = f"zookeeper {zk.hosts}"
    chroot = zk.hosts.partition("/")[2]
    try:
        chroot_exists = not chroot or client.exists("/") is not None
        ledgers = nodes = None
        ml_root, ml_tenants = False, 0
        if chroot_exists and bookkeeper:
            ledgers = client.exists(zk.ledgers_root) is not None
            nodes = set(client.get_children(zk.ledgers_root)) if ledgers else set()
        if chroot_exists and pulsar:
            ml_root = client.exists(zk.managed_ledgers_root) is not None
            ml_tenants = len(client.get_children(zk.managed_ledgers_root)) if ml_root else 0
    except NoAuthError as e:
        raise SourceError(where, f"NoAuth reading the cluster's root nodes; {AUTH_HINT}") from e
    return judge_structure(
        where,
        chroot="/" + chroot if chroot else "",
        chroot_exists=chroot_exists,
        ledgers_root=zk.ledgers_root if bookkeeper else None,
        ledgers_root_exists=ledgers,
        ledgers_root_nodes=nodes,
        managed_ledgers_root=zk.managed_ledgers_root if pulsar else None,
        managed_ledgers_root_exists=ml_root,
        managed_ledger_tenants=ml_tenants,
        allow_empty_metadata=allow_empty_metadata,
        option=option,
    )


def check_snapshot_structure(source: Any, *, allow_empty_metadata: bool = False) -> dict[str, Any]:
    """The same checks on a ZooKeeper data directory (``ledgerlens.sources.zk_snapshot``), at the
    point in time it is read at (the plan's ``present`` probes)."""
    plan = source.prepare()
    roots = source._roots()
    chroot = source.chroot.rstrip("/")
    bk_root, ml_root = roots.get("bk_ledgers"), roots.get("managed_ledgers")
    return judge_structure(
        f"zk-snapshot {source.data_dir}",
        chroot=chroot,
        chroot_exists=not chroot or chroot in plan.present,
        ledgers_root=source.ledgers_root if bk_root else None,
        ledgers_root_exists=bk_root in plan.present if bk_root else None,
        ledgers_root_nodes={n for n in BOOKKEEPER_NODES if f"{bk_root}/{n}" in plan.present},
        managed_ledgers_root=source.managed_ledgers_root if ml_root else None,
        managed_ledgers_root_exists=ml_root in plan.present if ml_root else False,
        managed_ledger_tenants=None,  # counted after collection (``check_inventory``)
        allow_empty_metadata=allow_empty_metadata,
        option="--zookeeper",  # or a zk-snapshot store's #PATH
    )


def judge_structure(
    where: str,
    *,
    chroot: str,
    chroot_exists: bool,
    ledgers_root: str | None,
    ledgers_root_exists: bool | None,
    ledgers_root_nodes: set[str] | None,
    managed_ledgers_root: str | None,
    managed_ledgers_root_exists: bool,
    managed_ledger_tenants: int | None,
    allow_empty_metadata: bool = False,
    option: str = "--zookeeper",
) -> dict[str, Any]:
    """Refuse a store that is not the metadata of a Pulsar cluster; returns what was seen.

    A missing chroot is always an error; a ledgers root without ``LAYOUT`` and ``available`` or a
    missing managed-ledger root is an error unless ``allow_empty_metadata``.
    ``ledgers_root`` / ``managed_ledgers_root`` None: the store does not hold that metadata.
    """
    if not chroot_exists:
        raise ImplausibleInputError(
            f"{where}: chroot {chroot} does not exist; check the path after host:port in {option}"
        )
    children = ledgers_root_nodes or set()
    root_hint = (
        "--ledgers-root and the chroot in --zookeeper" if option == "--zookeeper" else f"the path in {option}"
    )
    seen: dict[str, Any] = {"where": where, "chroot": chroot}
    if ledgers_root is not None:
        seen["ledgers_root"] = ledgers_root
        seen["ledgers_root_nodes"] = sorted(n for n in BOOKKEEPER_NODES if n in children)
        missing = [n for n in BOOKKEEPER_NODES if n not in children]
        if missing and not allow_empty_metadata:
            what = "does not exist" if not ledgers_root_exists else f"has no {', '.join(missing)}"
            raise ImplausibleInputError(
                f"{where}: {ledgers_root} {what}, so it is not a BookKeeper ledgers root; "
                f"check {root_hint}{_override(False)}"
            )
    if managed_ledgers_root is not None:
        seen["managed_ledgers_root"] = managed_ledgers_root_exists
        seen["managed_ledger_tenants"] = managed_ledger_tenants
        if not managed_ledgers_root_exists and not allow_empty_metadata:
            raise ImplausibleInputError(
                f"{where}: {managed_ledgers_root} does not exist, so this is not a Pulsar cluster's "
                f"metadata (or it never had a topic); check the chroot in {option}{_override(False)}"
            )
    return seen


def check_admin_structure(
    get: Callable[[str], Any],
    where: str,
    *,
    concurrency: int = 8,
    allow_empty_metadata: bool = False,
) -> dict[str, Any]:
    """What a Pulsar admin API holds, as the admin source reads it: its tenants
    (``/admin/v2/tenants``), their namespaces and each namespace's persistent topics with system
    topics (the managed ledgers of its metadata store). ``get(endpoint)``: the parsed answer, None
    for 404, ``SourceError`` otherwise (``sources.admin_client.admin_get``: bounded by one deadline).

    Returns what was seen (``judge_structure``'s keys: ``managed_ledger_tenants`` the tenants with
    at least one topic, for the bucket gate of ``preflight``), and ``tenants``, ``namespaces``,
    ``topics``. Counting stops at the deadline: then the counts are lower bounds (``complete``
    false) and ``managed_ledger_tenants`` is None when no topic was seen yet (the gate is left to
    ``check_inventory`` after collection). A refusal (401 / 403) is an error: the collection needs
    these listings.
    """
    counts = {"tenants": 0, "namespaces": 0, "topics": 0}
    with_topics: set[str] = set()
    complete = True

    def listing(endpoint: str, *, vanishes: bool = True) -> list[str] | None:
        """The names listed at ``endpoint``; [] for a tenant or namespace deleted meanwhile (404,
        ``vanishes``); None (and the counts incomplete) for what did not answer in time."""
        nonlocal complete
        try:
            found = get(endpoint)
        except AdminAuthError:
            raise
        except SourceError:  # slow or failing: the collection, with its retries, will tell
            found = None
            vanishes = False
        if isinstance(found, list):
            return [str(x) for x in found]
        if found is None and vanishes:
            return []
        complete = False
        return None

    tenants = listing("/admin/v2/tenants", vanishes=False)
    if tenants is not None:
        counts["tenants"] = len(tenants)
        with ThreadPoolExecutor(max(1, concurrency)) as pool:
            found = pool.map(lambda t: listing(f"/admin/v2/namespaces/{_q(t)}"), sorted(tenants))
            namespaces = sorted(ns for names in found for ns in (names or ()))
            counts["namespaces"] = len(namespaces)
            endpoints = [
                _ns_api(ns).format(kind="persistent") + "?includeSystemTopic=true" for ns in namespaces
            ]
            for ns, topics in zip(namespaces, pool.map(listing, endpoints), strict=True):
                persistent = [t for t in topics or () if t.startswith("persistent://")]
                counts["topics"] += len(persistent)
                if persistent:
                    with_topics.add(ns.split("/", 1)[0])
    seen = judge_structure(
        where,
        chroot="",
        chroot_exists=True,
        ledgers_root=None,
        ledgers_root_exists=None,
        ledgers_root_nodes=None,
        managed_ledgers_root="/admin/v2/tenants",
        managed_ledgers_root_exists=True,
        managed_ledger_tenants=len(with_topics) if complete or with_topics else None,
        allow_empty_metadata=allow_empty_metadata,
        option="--admin-url",
    )
    return {**seen, **counts, "complete": complete}


MANAGED = "managed_ledgers"  # the look of managed_ledger_look


def managed_ledger_look() -> Look:
    """The managed ledgers ``check_inventory`` looks for (decoded ones), counted with the audit's
    facts (``audit.facts``)."""
    return Look("managed_ledgers", MANAGED, F.col("error").isNull())


def check_inventory(
    tables: Mapping[str, DataFrame],
    *,
    where: str,
    allow_empty_metadata: bool = False,
    managed: int | None = None,
) -> None:
    """Refuse a lopsided inventory: no managed ledger, but offloaded objects or Pulsar ledgers.

    ``managed``: the count of ``managed_ledger_look`` when the caller has it; None: looked up
    here. BookKeeper and the bucket are probed (one job) only when there is no managed ledger.
    """
    probes: dict[str, DataFrame] = {}
    mls = tables.get("managed_ledgers")
    if managed is None and mls is not None:
        probes["managed_ledgers"] = mls.filter(managed_ledger_look().where)
    elif managed:
        return
    if allow_empty_metadata:
        return
    bk = tables.get("bk_ledgers")
    if bk is not None:
        probes["pulsar_ledgers"] = bk.filter(
            F.col("managed_ledger").isNotNull() | (F.col("application") == "pulsar")
        )
    if tables.get("offload_objects") is not None:
        probes["offload_objects"] = tables["offload_objects"]
    nonempty: set[str] = set()
    if probes:  # one job: a row of each non-empty probe
        firsts = [df.limit(1).select(F.lit(name).alias("probe")) for name, df in probes.items()]
        nonempty = {r["probe"] for r in union_all(firsts).collect()}
    if "managed_ledgers" in nonempty:
        return
    parts = (
        ("Pulsar ledgers in BookKeeper", "pulsar_ledgers" in nonempty),
        ("offloaded objects in the bucket", "offload_objects" in nonempty),
    )
    found = " and ".join(w for w, n in parts if n)
    if found:
        raise lopsided_error(where, found)


def lopsided_error(where: str, found: str) -> ImplausibleInputError:
    """The error for metadata without a managed ledger next to storage that holds ``found``."""
    return ImplausibleInputError(
        f"{where}: no managed ledger found, but {found}: the metadata looked at is not this storage's "
        f"cluster (wrong chroot, or a bucket shared with another cluster); every object would look "
        f"orphaned{_override(False)}"
    )


def wrong_root_suspicion(missing: int, references: int) -> dict[str, Any] | None:
    """The ``suspected_wrong_root`` summary entry when the missing share is implausibly high."""
    if missing <= MISSING_MIN or references <= 0 or missing <= MISSING_SHARE * references:
        return None
    return {
        "missing_ledgers": missing,
        "referenced_ledgers": references,
        "share": round(missing / references, 4),
        "thresholds": {"share": MISSING_SHARE, "min_ledgers": MISSING_MIN},
        "message": (
            f"{missing} of {references} referenced ledgers ({missing / references:.0%}) are missing from "
            "BookKeeper: far more than data loss looks like. Suspected wrong --ledgers-root or chroot; "
            "missing_ledger findings are downgraded to warnings and no orphan is proposed for deletion until "
            "this is checked"
        ),
    }


def downgrade_missing(findings: DataFrame) -> DataFrame:
    """``missing_ledger`` findings as warnings, and orphan findings as ``investigate`` (never a
    deletion candidate), all marked ``suspected_wrong_root`` in their evidence."""
    missing = F.col("kind") == "missing_ledger"
    orphan = F.col("kind").isin("orphan_ledger", "orphan_offload_object")
    marked = F.concat(
        F.expr("substring(evidence, 1, length(evidence) - 1)"), F.lit(',"suspected_wrong_root":true}')
    )
    touched = (missing | orphan) & F.col("evidence").endswith("}") & (F.length("evidence") > 2)
    return (
        findings.withColumn(
            "severity",
            F.when(missing, F.lit(declared("missing_ledger").other("warning"))).otherwise(F.col("severity")),
        )
        .withColumn("action", F.when(orphan, F.lit("investigate")).otherwise(F.col("action")))
        .withColumn("evidence", F.when(touched, marked).otherwise(F.col("evidence")))
    )
