"""The live re-verification every deletion must pass, right before it happens.

The plan was made from a snapshot; brokers kept working since. The deleter's check is a superset of
the audit's: "referenced" is ``ledgerlens.formats.references``, applied to two reads of the live
stores, and an item is deleted only when both find it unreferenced and provable:

- the reference index (:mod:`ledgerlens.deletion.references`): every managed ledger, cursor and
  schema locator of the Pulsar stores, read at the start of the deleter run and again whenever it
  is older than its bound (default 5 minutes);
- right before the delete, the item's own nodes, pipelined per batch of items, nothing cached
  between batches: the ledger znode, the owners its custom metadata names (managed ledger and its
  cursors, schema locator), the owner tenant, the objects' HEAD.

ledger (``delete_ledger``)
    - ledger znode absent: ``already_gone`` (success, PIP-186's idempotence);
    - znode version or BookKeeper custom metadata not what the plan recorded: ``skipped_mismatch``
      (a stale or forged message; the ledger was rewritten or is not the planned one);
    - owner tenant not this cluster's by the audit's rule (its node ``/admin/policies/<tenant>``
      read live, or a managed ledger or schema of it in the reference index) nor an approved
      deleted tenant, or owner unknown: ``skipped_mismatch`` (another cluster's ledger);
    - any managed ledger's ledger list, any cursor's cursor ledger, ``CompactedTopicLedger`` or
      delayed-bucket property, any schema locator names it (index or live owner read), or it may be
      the compacted ledger the open ``__compaction`` cursor ledger holds: ``skipped_in_use``;
    - an owner whose references are unknown (emptied, does not decode, ``NoAuth``, a subtree that
      cannot be listed): ``skipped_unprovable``, with the node that made it so;
    - a node that cannot be read now (connection loss): ``retry``;
    - else ``delete`` with the znode version just read.

offload copy (``delete_object``)
    - every planned object absent: ``already_gone``;
    - size or ETag differs, user metadata names another managed ledger or another cluster, owner
      tenant not the audited cluster's: ``skipped_mismatch``;
    - any managed ledger's offload context names the copy's uuid: ``skipped_in_use``;
    - the owner managed ledger's references are unknown: ``skipped_unprovable``;
    - the copy is the only one of its data (the ledger's BookKeeper copy is gone, or a PIP-76
      segment whose ledgers are not known) while its managed ledger still exists:
      ``skipped_unprovable`` (deleted only once the managed ledger is proven deleted);
    - else ``delete`` (data and index objects of the plan, nothing else).

topic (``load_topic``)
    - managed ledger gone: ``skipped_mismatch``; tenant not ours: ``skipped_mismatch``; else ``load``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledgerlens.deletion.references import DEFAULT_ROOTS, ReferenceIndex, Roots
from ledgerlens.errors import LedgerLensError
from ledgerlens.formats import managed_ledger as mlf
from ledgerlens.formats import references as refs
from ledgerlens.formats.bookkeeper import decode_ledger_metadata
from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.formats.paths import ledger_path
from ledgerlens.formats.references import owners_of
from ledgerlens.formats.schema import decode_schema_locator

DELETE, ALREADY_GONE, IN_USE, UNPROVABLE, MISMATCH, RETRY, LOAD = (
    "delete",
    "already_gone",
    "skipped_in_use",
    "skipped_unprovable",
    "skipped_mismatch",
    "retry",
    "load",
)


class Unprovable(Exception):
    """A node whose references are unknown (emptied, does not decode, not readable by us)."""

    def __init__(self, node: str, why: str) -> None:
        super().__init__(f"{node}: {why}")
        self.node = node
        self.why = why


@dataclass
class Verdict:
    """What to do with one item, and why."""

    decision: str
    reason: str
    detail: dict[str, Any] = field(default_factory=dict)


class _Absent:
    """A node that does not exist."""


ABSENT = _Absent()


@dataclass(frozen=True)
class Node:
    """A znode read: its bytes and version."""

    data: bytes
    version: int


def get_many(client: Any, paths: Iterable[str]) -> dict[str, Node | _Absent | Exception]:
    """Pipelined reads: every path in flight at once; absent nodes map to ``ABSENT``."""
    from kazoo.exceptions import NoNodeError

    wanted = list(dict.fromkeys(paths))
    pending = [(p, client.get_async(p)) for p in wanted]
    out: dict[str, Node | _Absent | Exception] = {}
    for p, res in pending:
        try:
            data, stat = res.get(timeout=30)
            out[p] = Node(data or b"", int(stat.version))
        except NoNodeError:
            out[p] = ABSENT
        except Exception as e:  # noqa: BLE001 - connection loss, session expiry, timeout: retry later
            out[p] = e
    return out


def children_many(client: Any, paths: Iterable[str]) -> dict[str, list[str] | _Absent | Exception]:
    """Pipelined child listings."""
    from kazoo.exceptions import NoNodeError

    wanted = list(dict.fromkeys(paths))
    pending = [(p, client.get_children_async(p)) for p in wanted]
    out: dict[str, list[str] | _Absent | Exception] = {}
    for p, res in pending:
        try:
            out[p] = sorted(res.get(timeout=30))
        except NoNodeError:
            out[p] = ABSENT
        except Exception as e:  # noqa: BLE001
            out[p] = e
    return out


def _err(e: Exception) -> str:
    from ledgerlens.redact import redact

    return redact(f"{type(e).__name__}: {e}")[:300]


def tenant_of_ml(ml: str) -> str | None:
    try:
        return parse_managed_ledger(ml).tenant
    except LedgerLensError:
        return None


class LiveReader:
    """Reads for one batch of items (fresh each batch; no cache survives a batch).

    ``bk`` reads ``/ledgers``; ``pulsar`` reads managed ledgers, schemas and tenants (the same client
    when one ZooKeeper holds both).
    """

    def __init__(self, bk: Any, pulsar: Any, roots: Roots = DEFAULT_ROOTS) -> None:
        self.bk = bk
        self.pulsar = pulsar
        self.roots = roots

    def tenants(self, tenants: Iterable[str]) -> dict[str, bool | Exception]:
        got = get_many(self.pulsar, (f"{self.roots.tenants}/{t}" for t in tenants))
        out: dict[str, bool | Exception] = {}
        for t in tenants:
            v = got[f"{self.roots.tenants}/{t}"]
            out[t] = v if isinstance(v, Exception) else not isinstance(v, _Absent)
        return out

    def managed_ledgers(self, mls: Iterable[str]) -> dict[str, tuple[set[int], dict[str, Any]] | Exception]:
        """Per managed ledger: (referenced ids, {"uuids", "compaction_open", "compacted", "exists"})
        or the error: :class:`Unprovable` when the references are unknown (emptied, undecodable,
        ``NoAuth``), another exception when the store could not be read now.

        A managed ledger whose node is gone references nothing (its cursors are its children).
        """
        from kazoo.exceptions import NoAuthError

        mls = list(dict.fromkeys(mls))
        root = self.roots.managed_ledgers
        nodes = get_many(self.pulsar, (f"{root}/{m}" for m in mls))
        kids = children_many(self.pulsar, (f"{root}/{m}" for m in mls))
        cursor_paths = []
        for m in mls:
            k = kids[f"{root}/{m}"]
            if isinstance(k, list):
                cursor_paths += [f"{root}/{m}/{c}" for c in k]
        cursors = get_many(self.pulsar, cursor_paths)
        out: dict[str, tuple[set[int], dict[str, Any]] | Exception] = {}
        for m in mls:
            path = f"{root}/{m}"
            node, k = nodes[path], kids[path]
            if isinstance(node, Exception) or isinstance(k, Exception):
                err = node if isinstance(node, Exception) else k
                assert isinstance(err, Exception)
                out[m] = (
                    Unprovable(path, f"not readable ({_err(err)})") if isinstance(err, NoAuthError) else err
                )
                continue
            ids: set[int] = set()
            info: dict[str, Any] = {
                "uuids": set(),
                "compaction_open": False,
                "compacted": None,
                "exists": False,
            }
            try:
                if isinstance(node, Node):
                    info["exists"] = True
                    rec = mlf.decode_managed_ledger(node.data, path=path)
                    if refs.is_emptied(rec, node.version):
                        raise Unprovable(
                            path, f"emptied (0 bytes, rewritten at znode version {node.version})"
                        )
                    ids.update(r.ledger_id for r in refs.managed_ledger_references(rec))
                    info["uuids"] = refs.offload_uuids(rec)
                for c in k if isinstance(k, list) else []:
                    cpath = f"{path}/{c}"
                    cnode = cursors[cpath]
                    if isinstance(cnode, NoAuthError):
                        raise Unprovable(cpath, f"not readable ({_err(cnode)})")
                    if isinstance(cnode, Exception):
                        raise cnode
                    if isinstance(cnode, _Absent):
                        continue  # cursor deleted between list and read: it references nothing now
                    cur = mlf.decode_cursor(cnode.data, path=cpath)
                    ids.update(r.ledger_id for r in refs.cursor_references(cur))
                    if c == refs.COMPACTION_CURSOR:
                        info["compaction_open"] = cur.cursors_ledger_id >= 0
                        info["compacted"] = cur.compacted_ledger_id
            except LedgerLensError as e:  # does not decode: its references are unknown
                out[m] = Unprovable(getattr(e, "where", None) or path, f"does not decode ({e})")
                continue
            except Exception as e:  # noqa: BLE001 - Unprovable, or unreadable now: cannot prove anything
                out[m] = e
                continue
            out[m] = (ids, info)
        return out

    def schemas(self, schema_ids: Iterable[str]) -> dict[str, set[int] | Exception]:
        from kazoo.exceptions import NoAuthError

        ids = list(dict.fromkeys(schema_ids))
        got = get_many(self.pulsar, (f"{self.roots.schemas}/{s}" for s in ids))
        out: dict[str, set[int] | Exception] = {}
        for s in ids:
            path = f"{self.roots.schemas}/{s}"
            v = got[path]
            if isinstance(v, NoAuthError):
                out[s] = Unprovable(path, f"not readable ({_err(v)})")
            elif isinstance(v, Exception):
                out[s] = v
            elif isinstance(v, _Absent):
                out[s] = set()
            else:
                try:
                    out[s] = {
                        r.ledger_id for r in refs.schema_references(decode_schema_locator(v.data, path=path))
                    }
                except LedgerLensError as e:
                    out[s] = Unprovable(path, f"does not decode ({e})")
        return out

    def ledger_nodes(self, ledger_ids: Iterable[int]) -> dict[int, bool | Exception]:
        """Whether each ledger's BookKeeper metadata znode exists (its BookKeeper copy)."""
        ids = list(dict.fromkeys(ledger_ids))
        got = get_many(self.bk, (ledger_path(i, self.roots.ledgers) for i in ids))
        out: dict[int, bool | Exception] = {}
        for i in ids:
            val = got[ledger_path(i, self.roots.ledgers)]
            out[i] = val if isinstance(val, Exception) else not isinstance(val, _Absent)
        return out


def _unreadable(what: str, e: Exception, retry_why: str) -> Verdict:
    """``skipped_unprovable`` for a node whose references are unknown, ``retry`` for a store that
    could not be read now."""
    if isinstance(e, Unprovable):
        return Verdict(UNPROVABLE, f"{what}: {e.why}", {"node": e.node})
    return Verdict(RETRY, f"{what}: {retry_why} ({_err(e)})")


def _index_verdict(
    index: ReferenceIndex | None, ledger_id: int | None, names: Iterable[str]
) -> Verdict | None:
    """What the reference index says of an item: in use, unprovable, or nothing against it."""
    if index is None:
        return None
    if ledger_id is not None and ledger_id in index.ledgers:
        node = index.ledgers[ledger_id]
        return Verdict(IN_USE, f"referenced by {node}", {"node": node})
    hit = index.unprovable_for(sorted(set(names)))
    if hit is not None:
        name, why = hit
        return Verdict(
            UNPROVABLE, f"references of {name} are unknown: {why}", {"node": why.split(": ", 1)[0]}
        )
    return None


def _tenant_verdict(
    tenants: Iterable[str | None],
    live: Mapping[str, bool | Exception],
    deleted: set[str],
    index: ReferenceIndex | None = None,
) -> Verdict | None:
    """The audit's ownership rule (``audit/ownership.py``): a tenant is this cluster's when its node
    (read live) or any of its managed ledgers or schemas (the reference index) is in the Pulsar store."""
    owned = index.owned_tenants() if index is not None else set()
    for t in tenants:
        if not t:
            return Verdict(MISMATCH, "owner tenant unknown: not proven to be this cluster's")
        state = live.get(t)
        if isinstance(state, Exception):
            return Verdict(RETRY, f"tenant {t}: cannot read ({_err(state)})")
        if not state and t not in deleted and t not in owned:
            return Verdict(MISMATCH, f"tenant {t!r} is not in the Pulsar store: another cluster's data")
    return None


def verify_ledgers(
    items: Sequence[Mapping[str, Any]],
    reader: LiveReader,
    deleted_tenants: Iterable[str] = (),
    index: ReferenceIndex | None = None,
) -> list[tuple[Verdict, Node | None]]:
    """Verdicts for approved ``delete_ledger`` items, with the ledger node read (for the version).

    ``index`` is the deleter's current reference index (every reference of the Pulsar stores);
    without it only the owners the ledger's custom metadata names are read (tests of one rule).
    """
    deleted = set(deleted_tenants)
    paths = [ledger_path(int(i["expected"]["ledger_id"]), reader.roots.ledgers) for i in items]
    nodes = get_many(reader.bk, paths)
    # what each live ledger claims, to know which owners to read
    claims: list[dict[str, str] | None] = []
    custom: dict[str, str] | None
    pre: list[Verdict | None] = []
    for item, path in zip(items, paths, strict=True):
        exp = item["expected"]
        node = nodes[path]
        claims.append(None)
        if isinstance(node, _Absent):
            pre.append(Verdict(ALREADY_GONE, "ledger znode absent"))
            continue
        if isinstance(node, Exception):
            pre.append(Verdict(RETRY, f"ledger znode unreadable: {_err(node)}"))
            continue
        if node.version != int(exp["znode_version"]):
            pre.append(
                Verdict(
                    MISMATCH,
                    f"ledger metadata changed since the plan "
                    f"(znode version {node.version}, plan {exp['znode_version']})",
                )
            )
            continue
        try:
            custom = decode_ledger_metadata(node.data, path=path).custom_text()
        except LedgerLensError as e:
            pre.append(Verdict(MISMATCH, f"ledger metadata does not decode any more: {e}"))
            continue
        if dict(sorted(custom.items())) != dict(exp.get("custom_metadata") or {}):
            pre.append(Verdict(MISMATCH, "BookKeeper custom metadata differs from the plan"))
            continue
        if custom.get("application") != "pulsar":
            pre.append(Verdict(MISMATCH, "ledger has no Pulsar custom metadata"))
            continue
        claims[-1] = custom
        pre.append(None)

    mls: set[str] = set()
    schema_ids: set[str] = set()
    tenants: set[str] = set()
    owners: list[tuple[set[str], set[str], list[str | None]]] = []
    for custom in claims:
        if custom is None:
            owners.append((set(), set(), []))
            continue
        m, s = owners_of(custom)
        ts: list[str | None] = [tenant_of_ml(x) for x in sorted(m)]
        ts += [x.split("/", 1)[0] if "/" in x else None for x in sorted(s)]
        if not m and not s:
            ts = [None]
        mls |= m
        schema_ids |= s
        tenants |= {t for t in ts if t}
        owners.append((m, s, ts))
    live_tenants = reader.tenants(sorted(tenants)) if tenants else {}
    live_mls = reader.managed_ledgers(sorted(mls)) if mls else {}
    live_schemas = reader.schemas(sorted(schema_ids)) if schema_ids else {}

    out: list[tuple[Verdict, Node | None]] = []
    for item, path, verdict, (m, s, ts) in zip(items, paths, pre, owners, strict=True):
        node = nodes[path]
        if verdict is not None:
            out.append((verdict, None))
            continue
        assert isinstance(node, Node)
        lid = int(item["expected"]["ledger_id"])
        tv = _tenant_verdict(ts, live_tenants, deleted, index)
        if tv is not None:
            out.append((tv, None))
            continue
        decided = _index_verdict(index, lid, m | s)
        for ml in sorted(m) if decided is None else ():
            got = live_mls[ml]
            if isinstance(got, Exception):
                decided = _unreadable(f"managed ledger {ml}", got, "cannot prove the ledger unreferenced")
                break
            refs, info = got
            if lid in refs:
                decided = Verdict(IN_USE, f"referenced by managed ledger {ml} (ledger list or a cursor)")
                break
            component = (item.get("finding") or {}).get("component")
            if (
                component == "compacted-ledger"
                and info["compaction_open"]
                and (info["compacted"] is None or lid > int(info["compacted"]))
            ):
                decided = Verdict(
                    IN_USE, f"may be the compacted ledger of {ml}: the __compaction cursor ledger is open"
                )
                break
        if decided is None:
            for sid in sorted(s):
                got_s = live_schemas[sid]
                if isinstance(got_s, Exception):
                    decided = _unreadable(f"schema {sid}", got_s, "cannot read the locator")
                    break
                if lid in got_s:
                    decided = Verdict(IN_USE, f"referenced by the schema locator of {sid}")
                    break
        out.append(
            (decided or Verdict(DELETE, "unreferenced and unchanged", {"znode_version": node.version}), node)
        )
    return out


def head_object(client: Any, bucket: str, key: str) -> dict[str, Any] | None | Exception:
    """HEAD an object: {"size", "etag", "metadata"}, None when absent, or the error."""
    from botocore.exceptions import BotoCoreError, ClientError

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
    from concurrent.futures import ThreadPoolExecutor

    deleted = set(deleted_tenants)
    flat = [(n, o["key"]) for n, i in enumerate(items) for o in i["expected"]["objects"]]
    with ThreadPoolExecutor(max_workers=max(1, max_in_flight)) as pool:
        heads = list(pool.map(lambda nk: head_object(s3, bucket, nk[1]), flat))
    head_of = {(n, k): h for (n, k), h in zip(flat, heads, strict=True)}

    pre: list[Verdict | None] = []
    present: list[list[str]] = []
    owner: list[str | None] = []
    for n, item in enumerate(items):
        exp = item["expected"]
        want_bucket = exp.get("bucket")
        keys: list[str] = []
        verdict: Verdict | None = None
        ml: str | None = exp.get("managed_ledger")
        if want_bucket and want_bucket != bucket:
            verdict = Verdict(MISMATCH, f"planned for bucket {want_bucket}, deleter runs on {bucket}")
        for o in exp["objects"] if verdict is None else []:
            h = head_of[(n, o["key"])]
            if h is None:
                continue
            if isinstance(h, Exception):
                verdict = Verdict(RETRY, f"HEAD {o['key']}: {_err(h)}")
                break
            if h["size"] != int(o["size"]) or h["etag"] != o["etag"]:
                verdict = Verdict(
                    MISMATCH,
                    f"{o['key']} changed since the plan (size {h['size']} etag {h['etag']}, "
                    f"plan {o['size']} {o['etag']})",
                )
                break
            meta_ml = h["metadata"].get("managedledgername")
            if meta_ml and ml and meta_ml != ml:
                verdict = Verdict(MISMATCH, f"{o['key']} belongs to managed ledger {meta_ml}, not {ml}")
                break
            ml = ml or meta_ml
            meta_cluster = h["metadata"].get("pulsarclustername")
            if cluster_name and meta_cluster and meta_cluster != cluster_name:
                verdict = Verdict(
                    MISMATCH, f"{o['key']} was written by cluster {meta_cluster}, not {cluster_name}"
                )
                break
            keys.append(o["key"])
        if verdict is None and not keys:
            verdict = Verdict(ALREADY_GONE, "every planned object is absent")
        if verdict is None and not ml:
            verdict = Verdict(MISMATCH, "owner managed ledger unknown: not proven to be this cluster's")
        pre.append(verdict)
        present.append(keys)
        owner.append(ml)

    mls = sorted({m for m, v in zip(owner, pre, strict=True) if m and v is None})
    tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
    live_tenants = reader.tenants(tenants) if tenants else {}
    live_mls = reader.managed_ledgers(mls) if mls else {}
    # the ledgers' BookKeeper copies: without one, the objects are the only copy of their data
    wanted_ids = [
        int(i["expected"]["ledger_id"])
        for i, v in zip(items, pre, strict=True)
        if v is None and i["expected"].get("ledger_id") is not None
    ]
    in_bk = reader.ledger_nodes(wanted_ids) if wanted_ids else {}
    out: list[tuple[Verdict, list[str]]] = []
    for item, verdict, keys, ml in zip(items, pre, present, owner, strict=True):
        if verdict is not None:
            out.append((verdict, []))
            continue
        assert ml is not None
        tv = _tenant_verdict([tenant_of_ml(ml)], live_tenants, deleted, index)
        if tv is not None:
            out.append((tv, []))
            continue
        uuid = str(item["expected"]["uuid"])
        if index is not None and uuid in index.uuids:
            node = index.uuids[uuid]
            out.append((Verdict(IN_USE, f"the offload context of {node} references it", {"node": node}), []))
            continue
        iv = _index_verdict(index, None, [ml])
        if iv is not None:
            out.append((iv, []))
            continue
        got = live_mls[ml]
        if isinstance(got, Exception):
            out.append((_unreadable(f"managed ledger {ml}", got, "cannot prove the copy unreferenced"), []))
            continue
        _, info = got
        if uuid in info["uuids"]:
            out.append((Verdict(IN_USE, f"offload context of managed ledger {ml} references it"), []))
            continue
        lid = item["expected"].get("ledger_id")
        bk = in_bk.get(int(lid)) if lid is not None else False
        if isinstance(bk, Exception):
            out.append(
                (Verdict(RETRY, f"ledger {lid}: cannot read its BookKeeper metadata ({_err(bk)})"), [])
            )
            continue
        exists: bool | Exception = info["exists"] or (index is not None and ml in index.managed_ledgers)
        if not bk and not exists and topic_listed is not None:
            exists = topic_listed(ml)
        if isinstance(exists, Exception):
            out.append((Verdict(RETRY, f"admin API: cannot list the topics of {ml} ({_err(exists)})"), []))
            continue
        if not bk and exists:
            what = f"ledger {lid}'s" if lid is not None else "a PIP-76 segment's"
            node = f"{reader.roots.managed_ledgers}/{ml}"
            out.append(
                (
                    Verdict(
                        UNPROVABLE,
                        f"the only copy of {what} data (no BookKeeper copy) while managed ledger {ml} "
                        "still exists: deleted only once the managed ledger is proven deleted",
                        {"node": node, "only_copy": True},
                    ),
                    [],
                )
            )
            continue
        out.append((Verdict(DELETE, "unreferenced and unchanged", {"keys": keys}), keys))
    return out


def admin_topic_lister(web_url: str, token: str | None = None) -> Callable[[str], bool | Exception]:
    """Managed ledger -> whether the admin API lists its topic (one request per namespace, cached by
    the returned function; 404: the namespace is gone, so is the topic)."""
    import urllib.error

    from ledgerlens.deletion.status import rest
    from ledgerlens.formats.names import managed_ledger_to_topic

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


def verify_loads(
    items: Sequence[Mapping[str, Any]], reader: LiveReader, deleted_tenants: Iterable[str] = ()
) -> list[Verdict]:
    """Verdicts for approved ``load_topic`` items."""
    mls = [str(i["expected"]["managed_ledger"]) for i in items]
    nodes = get_many(reader.pulsar, (f"{reader.roots.managed_ledgers}/{m}" for m in mls))
    tenants = sorted({t for t in (tenant_of_ml(m) for m in mls) if t})
    live = reader.tenants(tenants) if tenants else {}
    out = []
    for m in mls:
        node = nodes[f"{reader.roots.managed_ledgers}/{m}"]
        tv = _tenant_verdict([tenant_of_ml(m)], live, set(deleted_tenants))
        if tv is not None:
            out.append(tv)
        elif isinstance(node, Exception):
            out.append(Verdict(RETRY, f"managed ledger {m}: {_err(node)}"))
        elif isinstance(node, _Absent):
            out.append(Verdict(MISMATCH, f"managed ledger {m} is gone: nothing to load"))
        else:
            out.append(Verdict(LOAD, "topic exists"))
    return out
