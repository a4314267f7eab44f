"""The Pulsar admin REST API (v2) as an inventory source: ``--source admin`` / ``admin:URL`` stores.

What it reads, per namespace (one Spark partition each), ``concurrency`` requests at a time:

- ``GET /admin/v2/tenants``, ``/namespaces/{tenant}``, ``/namespaces/{tenant}/{ns}`` (policies,
  the same JSON the metadata store keeps) -> ``pulsar_tenants``, ``namespace_policies``;
- ``GET /admin/v2/persistent/{tenant}/{ns}?includeSystemTopic=true`` (the managed ledgers of the
  metadata store, partitions included) and, per topic, ``.../internal-info`` (the managed-ledger
  info and cursors as the broker reads them from its metadata store, WITHOUT loading the topic:
  ``internalStats`` would load it, move ownership and let the broker trim or offload while the
  audit looks) -> ``managed_ledgers``, ``ml_ledgers``, ``cursors``;
- ``GET /admin/v2/schemas/{tenant}/{ns}/{topic}/schemas`` -> ``schema_ledgers`` (versions only).

What the API does not show (docs/audit-rules.md, "Admin API source"), the rows say so instead of
guessing: schema rows carry no ledger id (``ledger_id`` null, ``error`` null: the schema's ledgers
are a blind spot), cursor rows carry no string properties (``cursor_properties_unknown``: PIP-195
bucket ledgers of that managed ledger are a blind spot), offloaded ledgers carry the offload uuid
but no completion state (``offload_complete`` null: the audit infers it from BookKeeper), and no
znode bytes at all (compression, corrupt or unreadable nodes). BookKeeper's ledgers come from the
BookKeeper metadata store (``--bookkeeper-metadata``): the Pulsar standalone's bookie cannot serve
BookKeeper's HTTP admin API.

Errors: 429 and 5xx answers, timeouts and refused connections are retried with exponential
backoff (``Retry-After`` honoured, capped); past the retries, or on any other error, or an answer
that is not JSON, the run fails with one line naming the endpoint (``SourceError``): partial
results are never reported as complete. A topic or namespace that vanished between listing and
reading (404) is skipped and counted. The token (``auth.admin-token-env``/``-file``) is read on
the executor from its reference and only ever sent in the ``Authorization`` header.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledgerlens.errors import SourceError
from ledgerlens.formats.names import (
    decode_component,
    encode_component,
    parse_managed_ledger,
    split_topic,
    topic_to_managed_ledger,
)
from ledgerlens.formats.uuids import uuid_to_bits
from ledgerlens.inventory.rows import _name_columns, policy_row
from ledgerlens.proto import managed_ledger_pb2 as mlpb
from ledgerlens.sources.admin_client import (
    AdminApi,
    AdminAuthError,
    AdminClient,
    _ns_api,
    _q,
    admin_clusters,
    parse_admin_url,
)
from ledgerlens.sources.base import PULSAR_STAGES, MetadataStore, Row

__all__ = ["AdminApi", "AdminAuthError", "AdminClient", "AdminSource", "parse_admin_url"]

_PARTITION = re.compile(r"^(?P<base>.+)-partition-\d+$")


def _date_ms(text: str | None) -> int | None:
    """The broker's ``yyyy-MM-dd'T'HH:mm:ss.SSSZ`` dates (znode ctime/mtime) -> epoch ms."""
    if not text:
        return None
    for fmt in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            return int(datetime.strptime(text, fmt).timestamp() * 1000)
        except ValueError:
            continue
    return None


def _local_name(topic: str) -> tuple[str, str]:
    """``persistent://t/ns/x`` -> (``t/ns``, ``x``); a v1 ``persistent://t/c/ns/x`` -> (``t/c/ns``, ``x``)."""
    _domain, tenant, cluster, ns, local = split_topic(topic)
    return (f"{tenant}/{cluster}/{ns}" if cluster is not None else f"{tenant}/{ns}"), local


def managed_ledger_rows(ml: str, info: dict[str, Any]) -> Iterator[Row]:
    """MANAGED_LEDGERS, ML_LEDGERS and CURSORS rows of one ``internal-info`` answer."""
    names = _name_columns(ml)
    path = f"/managed-ledgers/{ml}"
    ledgers = info.get("ledgers") or []
    yield (
        "managed_ledgers",
        {
            "managed_ledger": ml,
            "path": path,
            **names,
            "compression": None,  # the API shows no znode bytes
            "ledger_count": len(ledgers),
            "total_size": sum(int(li.get("size") or 0) for li in ledgers),
            "total_entries": sum(int(li.get("entries") or 0) for li in ledgers),
            "last_ledger_id": int(ledgers[-1]["ledgerId"]) if ledgers else None,
            "terminated": info.get("terminatedPosition") is not None,
            "properties": {str(k): str(v) for k, v in (info.get("properties") or {}).items()},
            "znode_ctime_ms": _date_ms(info.get("creationDate")),
            "znode_mtime_ms": _date_ms(info.get("modificationDate")),
            "znode_version": info.get("version"),
        },
    )
    base = {"managed_ledger": ml, "tenant": names["tenant"], "namespace": names["namespace"]}
    last = len(ledgers) - 1
    for i, li in enumerate(ledgers):
        row = dict(
            base,
            ledger_id=int(li["ledgerId"]),
            position=i,
            is_last=i == last,
            entries=li.get("entries"),
            size=li.get("size"),
            timestamp_ms=li.get("timestamp"),
            properties={},
        )
        if li.get("offloadedContextUuid"):
            # an offload was started; whether it completed is not in the answer (null = unknown)
            row.update(offload_uuid=li["offloadedContextUuid"], offload_complete=None)
        yield "ml_ledgers", row
    for node, c in sorted((info.get("cursors") or {}).items()):
        try:
            name = decode_component(node)
        except Exception:  # noqa: BLE001 - keep the raw name
            name = node
        md = c.get("markDelete") or {}
        yield (
            "cursors",
            dict(
                base,
                cursor=name,
                cursor_node=node,
                path=f"{path}/{node}",
                cursors_ledger_id=c.get("cursorsLedgerId"),
                mark_delete_ledger_id=md.get("ledgerId"),
                mark_delete_entry_id=md.get("entryId"),
                properties={str(k): int(v) for k, v in (c.get("properties") or {}).items()},
                cursor_properties=None,  # not in the answer: bucket ledgers are a blind spot
                cursor_properties_unknown=True,
                individual_deleted_ranges=len(c.get("individualDeletedMessages") or []),
                znode_ctime_ms=_date_ms(c.get("creationDate")),
                znode_mtime_ms=_date_ms(c.get("modificationDate")),
                znode_version=c.get("version"),
            ),
        )


def unreadable_row(ml: str, err: SourceError) -> dict[str, Any]:
    """The MANAGED_LEDGERS error row of a topic whose ``internal-info`` the broker answers with an
    error: its managed-ledger node or a cursor node cannot be read (a metadata-store scan names which)."""
    return {
        "managed_ledger": ml,
        "path": f"/managed-ledgers/{ml}",
        **_name_columns(ml),
        "error": f"the broker cannot read this topic's managed-ledger or cursor metadata ({err})",
    }


def schema_row(schema_id: str) -> dict[str, Any]:
    """The SCHEMA_LEDGERS row of a topic's schema whose ledgers are unknown (a blind spot).

    The API is never asked for schemas: a broker that cannot read one version of a schema (its
    ledger is missing, the very state an audit looks for) deletes the whole schema, its node and
    its ledgers, while answering the read. So every listed topic's schema id is a blind spot (its
    schema ledgers are never orphans), whether or not the topic has a schema."""
    parts = schema_id.split("/")
    return {
        "schema_id": schema_id,
        "path": f"/schemas/{schema_id}",
        "tenant": parts[0],
        "namespace": "/".join(parts[:-1]),
    }


@dataclass(frozen=True)
class AdminSource(MetadataStore):
    """A Pulsar cluster's metadata, read through its admin REST API (Pulsar stages only)."""

    api: AdminApi
    provides: tuple[str, ...] = PULSAR_STAGES
    n_tasks: int | None = None
    kind: str = "admin"
    managed_ledgers_root: str = "/managed-ledgers"
    schemas_root: str = "/schemas"
    policies_root: str = "/admin/policies"

    @property
    def location(self) -> str:
        return f"admin:{self.api.url}"

    @property
    def rate_limit(self) -> float | None:
        return self.api.rate_limit

    @property
    def tasks(self) -> int | None:
        return self.n_tasks

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "blind_spots": [
                "schema ledger ids",
                "cursor string properties (delayed-index buckets)",
                "offload completion state",
                "znode bytes (compression, corrupt or unreadable nodes)",
            ],
        }

    def client(self, rate_limit: float | None = None) -> AdminClient:
        return AdminClient(self.api, rate_limit)

    def check(self) -> None:
        """The API answers as a Pulsar admin API within a few seconds (``admin_clusters``):
        a refused, unresolvable or silent endpoint is one ``SourceError`` at once, not minutes of
        retries."""
        admin_clusters(self.api)

    def clusters(self) -> list[str] | None:
        return sorted(c for c in admin_clusters(self.api) if c != "global")

    def _namespaces(self, c: AdminClient) -> list[str]:
        tenants = sorted(c.get("/admin/v2/tenants") or [])
        with ThreadPoolExecutor(max(1, self.api.concurrency)) as pool:
            lists = list(pool.map(lambda t: c.get(f"/admin/v2/namespaces/{_q(t)}", missing_ok=True), tenants))
        return sorted(str(ns) for found in lists for ns in (found or []))

    def plan(self, stage: str) -> list[str]:
        if stage == "namespace_policies":
            return ["*"]  # tenants and policies: a few thousand requests at most, one task
        if stage in ("managed_ledgers", "schema_ledgers"):
            return self._namespaces(self.client())
        raise ValueError(f"{self.location}: no stage {stage!r}")

    def read(
        self, stage: str, partitions: Sequence[str], *, rate_limit: float | None, stats: Counter[str]
    ) -> Iterator[Row]:
        c = self.client(rate_limit)
        try:
            if stage == "namespace_policies":
                yield from self._policies(c, stats)
            elif stage == "managed_ledgers":
                for ns in partitions:
                    yield from self._managed_ledgers(c, ns, stats)
            elif stage == "schema_ledgers":
                for ns in partitions:
                    yield from self._schemas(c, ns, stats)
            else:
                raise ValueError(f"{self.location}: no stage {stage!r}")
        finally:
            stats.update({"requests": c.requests, "retried": c.retried})

    def _policies(self, c: AdminClient, stats: Counter[str]) -> Iterator[Row]:
        tenants = sorted(c.get("/admin/v2/tenants") or [])
        for t in tenants:
            yield "pulsar_tenants", {"tenant": t, "path": f"{self.policies_root}/{t}", "store": self.location}
        namespaces = self._namespaces(c)

        def one(ns: str) -> tuple[str, Any]:
            return ns, c.get(_ns_api(ns).format(kind="namespaces"), missing_ok=True)

        with ThreadPoolExecutor(max(1, self.api.concurrency)) as pool:
            for ns, pol in pool.map(one, namespaces):
                if pol is None:
                    stats["vanished"] += 1
                    continue
                path = f"{self.policies_root}/{ns}"
                yield "namespace_policies", policy_row(ns, path, json.dumps(pol).encode())

    def _topics(self, c: AdminClient, ns: str) -> list[str]:
        found = c.get(_ns_api(ns).format(kind="persistent"), {"includeSystemTopic": "true"}, missing_ok=True)
        return sorted(str(t) for t in (found or []) if str(t).startswith("persistent://"))

    def internal_info(self, c: AdminClient, topic: str) -> Any:
        """``internal-info`` of one topic; None when it no longer exists (the broker answers a
        missing managed ledger with HTTP 500, so a failure is checked against a new listing)."""
        nsname, local = _local_name(topic)
        path = _ns_api(nsname).format(kind="persistent") + f"/{_q(local)}/internal-info"
        try:
            return c.get(path, missing_ok=True)
        except SourceError:
            if topic not in self._topics(c, nsname):
                return None
            raise

    def _managed_ledgers(self, c: AdminClient, ns: str, stats: Counter[str]) -> Iterator[Row]:
        def one(topic: str) -> tuple[str, Any, SourceError | None]:
            try:
                return topic, self.internal_info(c, topic), None
            except SourceError as e:
                if not e.problem.startswith("HTTP 500"):
                    raise  # unreachable, refused, rate limited past the retries, not authorized
                return topic, None, e

        topics = self._topics(c, ns)
        unreadable = 0
        with ThreadPoolExecutor(max(1, self.api.concurrency)) as pool:
            for topic, info, err in pool.map(one, topics):
                ml = topic_to_managed_ledger(topic)
                if err is not None:
                    # the broker answers this topic, and only this one, with an error: it cannot
                    # read its managed-ledger node or one of its cursor nodes (it does not say
                    # which). One corrupt_metadata row; its ledgers stay blind spots.
                    unreadable += 1
                    stats["unreadable"] += 1
                    yield "managed_ledgers", unreadable_row(ml, err)
                    continue
                if info is None:
                    stats["vanished"] += 1  # deleted since the listing
                    continue
                yield from managed_ledger_rows(ml, info)
        if unreadable > max(2, len(topics) // 2):
            raise SourceError(
                f"admin API GET {self.api.url}{_ns_api(ns).format(kind='persistent')}",
                f"the broker answers HTTP 500 for {unreadable} of {len(topics)} topics' internal-info:"
                " the broker is failing, not one damaged topic",
            )

    def _schemas(self, c: AdminClient, ns: str, stats: Counter[str]) -> Iterator[Row]:
        for topic in sorted({_PARTITION.sub(r"\g<base>", t) for t in self._topics(c, ns)}):
            nsname, local = _local_name(topic)
            yield "schema_ledgers", schema_row(f"{nsname}/{encode_component(local)}")

    # -- re-verification ------------------------------------------------------------------------
    def reads(self) -> AdminReads:
        """Point reads for re-verification, answered in the metadata store's terms (znode bytes)."""
        return AdminReads(self)


class AdminReads:
    """``get_many(paths)`` over the admin API: managed-ledger and cursor nodes as the protobuf
    bytes the metadata store would hold (rebuilt from ``internal-info``), ``/admin/policies/T`` of
    existing tenants; None for what is absent or what the API cannot show."""

    def __init__(self, src: AdminSource) -> None:
        self.src = src

    def __enter__(self) -> AdminReads:
        self.c = self.src.client()
        self._listed: dict[str, set[str]] = {}
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def _node(self, path: str) -> Any:
        root = self.src.managed_ledgers_root + "/"
        if path.startswith(self.src.policies_root + "/") and path.count("/") == 3:
            tenant = path.rsplit("/", 1)[1]
            got = self.c.get(f"/admin/v2/tenants/{_q(tenant)}", missing_ok=True)
            return None if got is None else b"{}"
        if path.startswith(self.src.schemas_root + "/"):
            # never read through the API (see schema_row): whether the schema exists is not decidable
            return SourceError(self.src.location, f"{path}: schemas are not read through the admin API")
        if not path.startswith(root):
            return None
        parts = path[len(root) :].split("/")
        size = 5 if len(parts) >= 5 and parts[3] == "persistent" else 4  # v1 names have a cluster
        ml, cursor = "/".join(parts[:size]), (parts[size] if len(parts) == size + 1 else None)
        try:
            if len(parts) > size + 1:
                raise ValueError(path)
            n = parse_managed_ledger(ml)
        except Exception:  # noqa: BLE001 - not a node the API can show: not decidable, never "absent"
            return SourceError(self.src.location, f"{path}: not a managed-ledger node the API can address")
        topic = f"persistent://{n.namespace}/{decode_component(ml.rsplit('/', 1)[1])}"
        if n.namespace not in self._listed:  # a missing managed ledger answers 500: list first
            self._listed[n.namespace] = set(self.src._topics(self.c, n.namespace))
        if topic not in self._listed[n.namespace]:
            return None
        info = self.src.internal_info(self.c, topic)
        if info is None:
            return None
        return _ml_bytes(info) if cursor is None else _cursor_bytes(info, cursor)

    def get_many(self, paths: Any) -> dict[str, Any]:
        wanted = list(dict.fromkeys(paths))
        with ThreadPoolExecutor(max(1, self.src.api.concurrency)) as pool:
            return dict(zip(wanted, pool.map(self._node, wanted), strict=True))


def _ml_bytes(info: dict[str, Any]) -> bytes:
    m = mlpb.ManagedLedgerInfo()
    for li in info.get("ledgers") or []:
        x = m.ledgerInfo.add()
        x.ledgerId = int(li["ledgerId"])
        if li.get("entries") is not None:
            x.entries = int(li["entries"])
        if li.get("size") is not None:
            x.size = int(li["size"])
        if li.get("timestamp") is not None:
            x.timestamp = int(li["timestamp"])
        if li.get("offloadedContextUuid"):
            msb, lsb = uuid_to_bits(li["offloadedContextUuid"])
            x.offloadContext.uidMsb, x.offloadContext.uidLsb = msb, lsb
            x.offloadContext.complete = True  # as the audit inferred it (see module docstring)
    return bytes(m.SerializeToString())


def _cursor_bytes(info: dict[str, Any], node: str) -> bytes | None:
    c = (info.get("cursors") or {}).get(node)
    if c is None:
        return None
    m = mlpb.ManagedCursorInfo()
    m.cursorsLedgerId = int(c.get("cursorsLedgerId", -1))
    md = c.get("markDelete") or {}
    if md:
        m.markDeleteLedgerId, m.markDeleteEntryId = int(md["ledgerId"]), int(md["entryId"])
    for k, v in (c.get("properties") or {}).items():
        p = m.properties.add()
        p.name, p.value = str(k), int(v)
    return bytes(m.SerializeToString())
