"""``delete_object``: delete an orphan offload copy's data and index objects (the plan's keys,
nothing else), in DeleteObjects requests of up to 1,000 keys. The rules ``verify_objects`` applies
are listed in :mod:`ledgerlens.deletion.verify`."""

from __future__ import annotations

import urllib.error
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ledgerlens.deletion.actions.base import Action, ActionContext, Work, head_verdict
from ledgerlens.deletion.outcomes import Outcome
from ledgerlens.deletion.references import ReferenceIndex
from ledgerlens.deletion.status import rest
from ledgerlens.deletion.verify import (
    ALREADY_GONE,
    DELETE,
    IN_USE,
    MISMATCH,
    RETRY,
    UNPROVABLE,
    LiveReader,
    Verdict,
    _err,
    _index_verdict,
    _tenant_verdict,
    _unreadable,
    tenant_of_ml,
)
from ledgerlens.errors import LedgerLensError
from ledgerlens.formats.names import managed_ledger_to_topic

DELETE_OBJECTS_MAX = 1000  # keys per S3 DeleteObjects request


def head_object(client: Any, bucket: str, key: str) -> dict[str, Any] | None | Exception:
    """HEAD an object: {"size", "etag", "metadata"}, None when absent, or the error."""
    from botocore.exceptions import BotoCoreError, ClientError  # botocore: only when a bucket is verified

    from ledgerlens.sources.s3 import is_not_found

    try:
        resp = client.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        return None if is_not_found(e) else e
    except (BotoCoreError, OSError) as e:
        return e
    return {
        "size": int(resp.get("ContentLength", -1)),
        "etag": resp.get("ETag"),
        "metadata": {k.lower(): v for k, v in (resp.get("Metadata") or {}).items()},
    }


def _heads(
    items: Sequence[Mapping[str, Any]], s3: Any, bucket: str, max_in_flight: int
) -> dict[tuple[int, str], dict[str, Any] | None | Exception]:
    """HEAD of every planned object, by (item index, key), ``max_in_flight`` at a time."""
    flat = [(n, o["key"]) for n, i in enumerate(items) for o in i["expected"]["objects"]]
    with ThreadPoolExecutor(max_workers=max(1, max_in_flight)) as pool:
        heads = list(pool.map(lambda nk: head_object(s3, bucket, nk[1]), flat))
    return {(n, k): h for (n, k), h in zip(flat, heads, strict=True)}


def _metadata_verdict(
    key: str, metadata: Mapping[str, Any], ml: str | None, cluster_name: str | None
) -> Verdict | None:
    """MISMATCH when an object's metadata names another managed ledger or another cluster."""
    meta_ml = metadata.get("managedledgername")
    if meta_ml and ml and meta_ml != ml:
        return Verdict(MISMATCH, f"{key} belongs to managed ledger {meta_ml}, not {ml}")
    meta_cluster = metadata.get("pulsarclustername")
    if cluster_name and meta_cluster and meta_cluster != cluster_name:
        return Verdict(MISMATCH, f"{key} was written by cluster {meta_cluster}, not {cluster_name}")
    return None


def _planned_objects(
    n: int,
    item: Mapping[str, Any],
    head_of: Mapping[tuple[int, str], dict[str, Any] | None | Exception],
    bucket: str,
    cluster_name: str | None,
) -> tuple[Verdict | None, list[str], str | None]:
    """The keys of item ``n`` still present and unchanged, and its owner managed ledger (the plan's,
    else the objects' metadata's); with a verdict when the objects already decide the item."""
    exp = item["expected"]
    want_bucket = exp.get("bucket")
    ml: str | None = exp.get("managed_ledger")
    if want_bucket and want_bucket != bucket:
        return Verdict(MISMATCH, f"planned for bucket {want_bucket}, deleter runs on {bucket}"), [], ml
    keys: list[str] = []
    for o in exp["objects"]:
        h = head_of[(n, o["key"])]
        if h is None:
            continue
        verdict = head_verdict(o, h if isinstance(h, Exception) else (h["size"], h["etag"]), o["etag"])
        if verdict is None:
            assert not isinstance(h, Exception)
            verdict = _metadata_verdict(o["key"], h["metadata"], ml, cluster_name)
            ml = ml or h["metadata"].get("managedledgername")
        if verdict is not None:
            return verdict, keys, ml
        keys.append(o["key"])
    if not keys:
        return Verdict(ALREADY_GONE, "every planned object is absent"), keys, ml
    if not ml:
        return Verdict(MISMATCH, "owner managed ledger unknown: not proven to be this cluster's"), keys, ml
    return None, keys, ml


@dataclass(frozen=True)
class _Owners:
    """What the live stores hold of the owners of the copies left to decide, read in batches."""

    tenants: dict[str, bool | Exception]
    managed_ledgers: dict[str, tuple[set[int], dict[str, Any]] | Exception]
    in_bookkeeper: dict[int, bool | Exception]  # the ledgers' BookKeeper copies, by ledger id

    @classmethod
    def read(cls, reader: LiveReader, undecided: Sequence[tuple[Mapping[str, Any], str]]) -> _Owners:
        mls = sorted({ml for _, ml in undecided})
        tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
        # without a BookKeeper copy, the objects are the only copy of their data
        ids = [
            int(i["expected"]["ledger_id"])
            for i, _ in undecided
            if i["expected"].get("ledger_id") is not None
        ]
        return cls(
            reader.tenants(tenants) if tenants else {},
            reader.managed_ledgers(mls) if mls else {},
            reader.ledger_nodes(ids) if ids else {},
        )


def _copy_verdict(
    item: Mapping[str, Any],
    ml: str,
    owners: _Owners,
    reader: LiveReader,
    deleted: set[str],
    index: ReferenceIndex | None,
    topic_listed: Callable[[str], bool | Exception] | None,
) -> Verdict | None:
    """Why an unchanged offload copy of managed ledger ``ml`` may not be deleted, or None."""
    tv = _tenant_verdict([tenant_of_ml(ml)], owners.tenants, deleted, index)
    if tv is not None:
        return tv
    uuid = str(item["expected"]["uuid"])
    if index is not None and uuid in index.uuids:
        node = index.uuids[uuid]
        return Verdict(IN_USE, f"the offload context of {node} references it", {"node": node})
    iv = _index_verdict(index, None, [ml])
    if iv is not None:
        return iv
    got = owners.managed_ledgers[ml]
    if isinstance(got, Exception):
        return _unreadable(f"managed ledger {ml}", got, "cannot prove the copy unreferenced")
    _, info = got
    if uuid in info["uuids"]:
        return Verdict(IN_USE, f"offload context of managed ledger {ml} references it")
    lid = item["expected"].get("ledger_id")
    bk = owners.in_bookkeeper.get(int(lid)) if lid is not None else False
    if isinstance(bk, Exception):
        return Verdict(RETRY, f"ledger {lid}: cannot read its BookKeeper metadata ({_err(bk)})")
    exists: bool | Exception = info["exists"] or (index is not None and ml in index.managed_ledgers)
    if not bk and not exists and topic_listed is not None:
        exists = topic_listed(ml)
    if isinstance(exists, Exception):
        return Verdict(RETRY, f"admin API: cannot list the topics of {ml} ({_err(exists)})")
    if not bk and exists:
        what = f"ledger {lid}'s" if lid is not None else "a PIP-76 segment's"
        return Verdict(
            UNPROVABLE,
            f"the only copy of {what} data (no BookKeeper copy) while managed ledger {ml} "
            "still exists: deleted only once the managed ledger is proven deleted",
            {"node": f"{reader.roots.managed_ledgers}/{ml}", "only_copy": True},
        )
    return None


def verify_objects(
    items: Sequence[Mapping[str, Any]],
    reader: LiveReader,
    s3: Any,
    *,
    bucket: str,
    cluster_name: str | None = None,
    deleted_tenants: Iterable[str] = (),
    max_in_flight: int = 16,
    index: ReferenceIndex | None = None,
    topic_listed: Callable[[str], bool | Exception] | None = None,
) -> list[tuple[Verdict, list[str]]]:
    """Verdicts for approved ``delete_object`` items, with the keys still present (to delete).

    ``topic_listed`` (managed ledger -> whether the admin API lists its topic): with it, an only copy
    is deleted only when the admin API does not list the topic either (:func:`admin_topic_lister`).
    """
    deleted = set(deleted_tenants)
    head_of = _heads(items, s3, bucket, max_in_flight)
    planned = [_planned_objects(n, item, head_of, bucket, cluster_name) for n, item in enumerate(items)]
    owners = _Owners.read(
        reader, [(item, ml) for item, (v, _, ml) in zip(items, planned, strict=True) if v is None and ml]
    )
    out: list[tuple[Verdict, list[str]]] = []
    for item, (verdict, keys, ml) in zip(items, planned, strict=True):
        if verdict is None:
            assert ml is not None
            verdict = _copy_verdict(item, ml, owners, reader, deleted, index, topic_listed)
            if verdict is None:
                out.append((Verdict(DELETE, "unreferenced and unchanged", {"keys": keys}), keys))
                continue
        out.append((verdict, []))
    return out


def admin_topic_lister(web_url: str, token: str | None = None) -> Callable[[str], bool | Exception]:
    """Managed ledger -> whether the admin API lists its topic (one request per namespace, cached by
    the returned function; 404: the namespace is gone, so is the topic)."""
    listed: dict[str, set[str] | Exception] = {}

    def topic_listed(ml: str) -> bool | Exception:
        try:
            topic = managed_ledger_to_topic(ml)
        except LedgerLensError as e:
            return e
        domain, rest_of = topic.split("://", 1)
        ns = "/".join(rest_of.split("/")[:2])
        if ns not in listed:
            try:
                listed[ns] = set(
                    rest(web_url, "GET", f"/admin/v2/{domain}/{ns}", timeout=10, token=token) or []
                )
            except urllib.error.HTTPError as e:
                listed[ns] = set() if e.code == 404 else e
            except (OSError, ValueError) as e:
                listed[ns] = e
        got = listed[ns]
        return got if isinstance(got, Exception) else topic in got

    return topic_listed


class DeleteObject(Action):
    name = "delete_object"
    uses_index = True

    def verify(self, ctx: ActionContext, group: Sequence[Work], deleted: Sequence[str]) -> None:
        if ctx.s3 is None or ctx.s3_source is None:
            for w in group:
                w.fail("no S3 source configured (--s3-endpoint/--bucket)")
            return
        items = [w.item for w in group if w.item is not None]
        res = verify_objects(
            items,
            ctx.reader,
            ctx.s3,
            bucket=ctx.s3_source.bucket,
            cluster_name=ctx.cluster_name or group[0].detail.get("cluster_name"),
            deleted_tenants=deleted,
            max_in_flight=ctx.s3_source.max_in_flight,
            index=ctx.index,
            topic_listed=admin_topic_lister(ctx.web_url, ctx.token()) if ctx.web_url else None,
        )
        for w, (verdict, keys) in zip(group, res, strict=True):
            w.decide(verdict, keys)

    def execute(self, ctx: ActionContext, work: Sequence[Work]) -> None:
        chunks: list[list[Work]] = [[]]
        for w in work:
            if sum(len(x.act) for x in chunks[-1]) + len(w.act) > DELETE_OBJECTS_MAX:
                chunks.append([])
            chunks[-1].append(w)
        chunks = [c for c in chunks if c]
        if not chunks:
            return
        assert ctx.s3_source is not None
        bucket = ctx.s3_source.bucket
        with ThreadPoolExecutor(max_workers=max(1, min(len(chunks), ctx.s3_source.max_in_flight))) as pool:
            list(pool.map(lambda ws: _delete_chunk(ctx.s3, bucket, ws), chunks))


def _delete_chunk(s3: Any, bucket: str, ws: list[Work]) -> None:
    keys = [k for w in ws for k in w.act]
    try:
        resp = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
    except Exception as e:  # noqa: BLE001 - S3 down or refusing: every copy of the chunk retried
        for w in ws:
            w.fail(f"S3 delete failed: {type(e).__name__}: {e}"[:300])
        return
    errors = {str(x.get("Key")): f"{x.get('Code')}: {x.get('Message')}" for x in resp.get("Errors") or []}
    for w in ws:
        bad = [f"{k} ({errors[k]})" for k in w.act if k in errors]
        if bad:
            w.fail(f"S3 refused to delete {', '.join(bad)}"[:300])
        else:
            w.outcome, w.reason = Outcome.DELETED, f"deleted {', '.join(w.act)}"
