"""The ZooKeeper snapshot source: inventory from a ZooKeeper data directory, zero load on the ensemble.

``ZooKeeperSnapshot(data_dir)`` reads the newest ``version-2/snapshot.<zxid>`` (plain, ``.gz`` or
``.snappy``) and replays every transaction log after it (``log.<zxid>``, including the
preallocated tail of the log a running server is writing), or up to ``until`` (a zxid, ``0x...``
or decimal, or a time: ISO-8601 or epoch ms). The result is the tree as ZooKeeper itself would
load it (a newest snapshot that ends early, as one ZooKeeper is still writing does, gives way to
the one before it, as in ZooKeeper), decoded into the same rows as the live scan
(``sources.zookeeper``) for the nodes under the BookKeeper ledgers root, ``/managed-ledgers``,
``/schemas`` and ``/admin/policies``.

Planning (driver): one pass over the logs keeps the final state of every node they touch under
those roots (the *overlay*); one pass over the snapshot checks its checksum and cuts the nodes of
each root into partitions of byte ranges, each carrying the overlay entries of its own nodes (one
more partition holds the nodes the logs created). Reading (executors): each task seeks to its
range (uncompressed snapshots; a compressed one is one partition per stage), applies the overlay
and decodes node by node, in constant memory per node.

What a snapshot cannot tell: nothing is unreadable in a snapshot, so a node whose ACL denies
``world:anyone`` read is reported as the live scan would see it (an error row, ``NoAuthError``).
"""

from __future__ import annotations

import base64
import os
import pickle
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ledgerlens.errors import ConfigError, DecodeError, SourceError
from ledgerlens.formats import zkdata
from ledgerlens.formats.zkdata import STAT as _STAT
from ledgerlens.settings.config import parse_time_ms
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES, MetadataStore, Row, stage_roots
from ledgerlens.sources.snapshot_rows import snapshot_rows

__all__ = ["SnapshotPlan", "ZooKeeperSnapshot", "find_files", "parse_until"]

_SNAP = re.compile(r"snapshot\.([0-9a-fA-F]+)(\.gz|\.snappy)?$")
_LOG = re.compile(r"log\.([0-9a-fA-F]+)$")
_CHUNK_NODES = 20_000  # nodes per partition of an uncompressed snapshot (1M ledgers: 50 Spark items)
_OPEN_ACL = -1  # ReferenceCountedACLCache.OPEN_UNSAFE_ACL_ID
# the problems of a file that ends early (plain, gzip and snappy), not of damaged bytes
_ENDS_EARLY = re.compile(r"truncated|unreadable: EOFError")


def _ends_early(e: DecodeError, snapshot: str) -> bool:
    """Whether ``e`` says that ``snapshot`` ends early (as one ZooKeeper is still writing does)."""
    return e.where.startswith(snapshot) and _ENDS_EARLY.match(e.problem) is not None


def parse_until(text: str) -> tuple[str, int] | None:
    """``--zk-until``: ``("zxid", n)`` for ``0x...`` or a plain number below 2**40... else ``("time", ms)``.

    A decimal number is a zxid when it has fewer than 13 digits (epoch ms have 13), else a time.
    """
    t = (text or "").strip()
    if not t:
        return None
    if t.lower().startswith("0x"):
        try:
            return "zxid", int(t, 16)
        except ValueError as e:
            raise ConfigError(f"--zk-until {text!r}: not a hex zxid") from e
    if t.isdigit() and len(t) < 13:
        return "zxid", int(t)
    return "time", parse_time_ms(t)


def find_files(data_dir: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(snapshots, logs) of a data directory as sorted ``(zxid, path)``; ``version-2`` is looked into."""
    d = data_dir
    if os.path.isdir(os.path.join(d, "version-2")):
        d = os.path.join(d, "version-2")
    try:
        names = os.listdir(d)
    except OSError as e:
        raise SourceError(f"zk-snapshot {data_dir}", f"cannot list the data directory: {e}") from e
    snaps, logs = [], []
    for n in names:
        m = _SNAP.match(n)
        if m:
            snaps.append((int(m.group(1), 16), os.path.join(d, n)))
        m = _LOG.match(n)
        if m:
            logs.append((int(m.group(1), 16), os.path.join(d, n)))
    if not snaps:
        raise SourceError(f"zk-snapshot {data_dir}", "no snapshot.<zxid> file (is this ZooKeeper's dataDir?)")
    return sorted(snaps), sorted(logs)


def _fingerprint(data_dir: str) -> tuple[tuple[str, int, int], ...]:
    snaps, logs = find_files(data_dir)
    out = []
    for _, path in snaps[-2:] + logs:
        try:
            st = os.stat(path)
        except OSError:
            continue
        out.append((path, st.st_size, st.st_mtime_ns))
    return tuple(out)


# -- the overlay: what the logs changed -------------------------------------------------------------
@dataclass
class _Change:
    """The final state of one node after the replayed transactions (``deleted`` or new fields)."""

    deleted: bool = False
    full: bool = False  # created by the logs: every field below is set
    data: bytes | None = None
    has_data: bool = False
    acl: tuple[zkdata.Acl, ...] | None = None
    stat: dict[str, int] = field(default_factory=dict)


def _apply(overlay: dict[str, _Change], rec: zkdata.LogRecord, wanted: tuple[str, ...]) -> None:
    for op in rec.ops:
        if not op.path.startswith(wanted):
            continue
        c = overlay.get(op.path)
        if op.kind == "create":
            overlay[op.path] = _Change(
                full=True,
                data=op.data,
                has_data=True,
                acl=op.acl,
                stat={
                    "czxid": rec.zxid,
                    "mzxid": rec.zxid,
                    "ctime": rec.time_ms,
                    "mtime": rec.time_ms,
                    "version": 0,
                    "cversion": 0,
                    "aversion": 0,
                    "ephemeral_owner": op.ephemeral_owner,
                    "pzxid": rec.zxid,
                },
            )
        elif op.kind == "delete":
            overlay[op.path] = _Change(deleted=True)
        elif c is not None and c.deleted:
            continue  # a change to a node already gone: ZooKeeper refuses it too
        elif op.kind == "setData":
            c = overlay.setdefault(op.path, _Change())
            c.data, c.has_data = op.data, True
            c.stat.update(mzxid=rec.zxid, mtime=rec.time_ms, version=op.version)
        elif op.kind == "setACL":
            c = overlay.setdefault(op.path, _Change())
            c.acl = op.acl
            c.stat.update(aversion=op.version)


def _merge(node: zkdata.SnapshotNode, c: _Change) -> zkdata.SnapshotNode:
    stat = node.stat._replace(**c.stat) if c.stat else node.stat
    return node._replace(data=c.data if c.has_data else node.data, stat=stat)


@dataclass
class _Replayed:
    """What the logs after a snapshot changed (the overlay) and the last transaction they replayed."""

    overlay: dict[str, _Change]
    last_zxid: int
    last_time_ms: int | None
    replayed: int


def _replay(
    chosen: list[tuple[int, str]], snap_zxid: int, until: tuple[str, int] | None, wanted: tuple[str, ...]
) -> _Replayed:
    """The transactions of the ``chosen`` logs after ``snap_zxid`` (up to ``until``) on the nodes
    under ``wanted``; a gap in the zxids is a ``DecodeError``."""
    overlay: dict[str, _Change] = {}
    last_zxid, last_time, replayed, prev = snap_zxid, None, 0, None
    newest = chosen[-1][1] if chosen else None
    stop = False
    for start, path in chosen:
        if until is not None and until[0] == "zxid" and start > until[1]:
            break
        for rec in zkdata.read_log(path, tail_ok=path == newest, after=snap_zxid):
            if rec.zxid <= snap_zxid:
                continue
            if until is not None and (rec.zxid if until[0] == "zxid" else rec.time_ms) > until[1]:
                stop = True
                break
            if prev is not None and rec.zxid >> 32 == prev >> 32 and rec.zxid != prev + 1:
                raise DecodeError(
                    f"{path} offset {rec.offset}", f"transactions missing: {prev:#x} then {rec.zxid:#x}"
                )
            if prev is None and rec.zxid >> 32 == snap_zxid >> 32 and rec.zxid > snap_zxid + 1:
                raise DecodeError(
                    f"{path} offset {rec.offset}",
                    f"transactions missing after the snapshot: {snap_zxid:#x} then {rec.zxid:#x}",
                )
            _apply(overlay, rec, wanted)
            prev = last_zxid = rec.zxid
            last_time = rec.time_ms
            replayed += 1
        if stop:
            break
    return _Replayed(overlay, last_zxid, last_time, replayed)


@dataclass
class _Scan:
    """One pass over a snapshot: each stage's partitions, the overlay's nodes met, the probes and
    clusters present, the newest change of the nodes looked at."""

    parts: dict[str, list[str]]
    seen: set[str] = field(default_factory=set)
    present: set[str] = field(default_factory=set)
    clusters: set[str] = field(default_factory=set)
    newest_change: int = 0


def _cluster_of(path: str, clusters_root: str | None) -> str | None:
    """The cluster named by ``path`` when it is a child of ``clusters_root`` (not ``global``)."""
    if clusters_root is None or not path.startswith(clusters_root + "/"):
        return None
    name = path[len(clusters_root) + 1 :]
    return name if name and "/" not in name and name != "global" else None


# -- the plan --------------------------------------------------------------------------------------
@dataclass
class SnapshotPlan:
    """What the driver worked out once: the files, the point in time, and each stage's partitions."""

    snapshot: str
    snapshot_zxid: int
    logs: list[str]
    last_zxid: int
    last_time_ms: int | None
    replayed: int
    compressed: bool
    acls: dict[int, list[zkdata.Acl]]
    partitions: dict[str, list[str]]
    nodes: int
    bytes: int
    overlay: dict[str, _Change] = field(default_factory=dict)
    clusters: list[str] = field(default_factory=list)
    present: frozenset[str] = frozenset()  # which of the source's ``probes()`` exist at that point
    newest_change: int = 0  # the highest czxid, mzxid or pzxid of the snapshot's nodes under the roots
    skipped: str = ""  # the newest snapshot, when it ended early and an older one was the base (why)


_PLANS: dict[tuple[Any, ...], SnapshotPlan] = {}
# a store's settings -> (the files' fingerprint, the plan) of its last ``prepare``
_READ: dict[tuple[Any, ...], tuple[Any, SnapshotPlan]] = {}


def _encode(obj: Any) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), 1)).decode()


def _decode(text: str) -> Any:
    return pickle.loads(zlib.decompress(base64.b64decode(text)))  # noqa: S301 - our own plan, same job


@dataclass(frozen=True)
class ZooKeeperSnapshot(MetadataStore):
    """A ZooKeeper data directory (see the module docstring).

    ``chroot`` is the prefix of the Pulsar (or BookKeeper) tree inside ZooKeeper (as in a connect
    string ``host:port/chroot``); rows name paths relative to it, exactly as the live scan does.
    """

    data_dir: str
    until: str = ""
    chroot: str = ""
    ledgers_root: str = "/ledgers"
    managed_ledgers_root: str = "/managed-ledgers"
    schemas_root: str = "/schemas"
    policies_root: str = "/admin/policies"
    clusters_root: str = "/admin/clusters"
    provides: tuple[str, ...] = BOOKKEEPER_STAGES + PULSAR_STAGES
    chunk_nodes: int = _CHUNK_NODES
    kind: str = "zk-snapshot"

    @property
    def location(self) -> str:
        return f"zk-snapshot:{self.data_dir}" + (f"#{self.chroot}" if self.chroot else "")

    def _roots(self) -> dict[str, str]:
        c = self.chroot.rstrip("/")
        return {s: c + "/" + r.strip("/") for s, r in stage_roots(self, self.stages).items()}

    def probes(self) -> tuple[str, ...]:
        """Full paths whose existence the plan records (``SnapshotPlan.present``): the chroot, the
        roots of this store's stages and the nodes every BookKeeper cluster writes under its
        ledgers root (the plausibility gates of ``ledgerlens.audit.gates`` read them)."""
        roots = self._roots()
        out = [self.chroot.rstrip("/")] if self.chroot.rstrip("/") else []
        out += list(roots.values())
        if "bk_ledgers" in roots:
            out += [f"{roots['bk_ledgers']}/{n}" for n in ("LAYOUT", "INSTANCEID", "available")]
        return tuple(out)

    # -- driver ---------------------------------------------------------------------------------
    def _settings(self) -> tuple[Any, ...]:
        """What a plan depends on besides the files."""
        return (
            self.data_dir,
            self.until,
            self.chroot,
            tuple(sorted(self._roots().items())),
            self.chunk_nodes,
        )

    def prepare(self) -> SnapshotPlan:
        """The plan (cached per source): pick files, replay the logs, index the snapshot."""
        settings = self._settings()
        files = _fingerprint(self.data_dir)  # the files as they are now: a running server keeps writing
        plan = _PLANS.get((*settings, files))
        if plan is None:
            if self.until:  # the base snapshot is chosen by the changes under this store's roots
                plan = self._prepare()
            else:  # one pass for every stage: the BookKeeper and Pulsar stores of a directory share it
                whole = replace(self, provides=BOOKKEEPER_STAGES + PULSAR_STAGES)
                key = (*whole._settings(), files)
                if key not in _PLANS:
                    _PLANS[key] = whole._prepare()
                plan = self._restricted(_PLANS[key])
            _PLANS[(*settings, files)] = plan
        _READ[settings] = (files, plan)
        return plan

    def _restricted(self, whole: SnapshotPlan) -> SnapshotPlan:
        """This store's plan from the plan of every stage: its stages' partitions, its probes, and
        the clusters when it is a Pulsar store."""
        probes = set(self.probes())
        return replace(
            whole,
            partitions={s: p for s, p in whole.partitions.items() if s in self.stages},
            present=frozenset(p for p in whole.present if p in probes),
            clusters=whole.clusters if self._clusters_root() is not None else [],
        )

    def pinned(self) -> ZooKeeperSnapshot:
        """This store pinned to the state its last plan read (``until`` that plan's last zxid), for
        re-verification: while the files are those the plan was made from, the pinned store reads
        that same plan instead of a second pass over the snapshot to make it again."""
        if self._settings() not in _READ:
            self.prepare()
        files, plan = _READ[self._settings()]
        out = replace(self, until=f"{plan.last_zxid:#x}")
        if files == _fingerprint(self.data_dir):
            _PLANS.setdefault((*out._settings(), files), plan)
        return out

    def _prepare(self) -> SnapshotPlan:
        where = f"zk-snapshot {self.data_dir}"
        until = parse_until(self.until)
        snaps, logs = find_files(self.data_dir)
        newest = snaps[-1]
        if until is not None and until[0] == "zxid":
            snaps = [s for s in snaps if s[0] <= until[1]]
            if not snaps:
                raise SourceError(where, f"no snapshot at or before zxid {until[1]:#x}")
        # The base: without ``until`` the newest snapshot (replaying every log makes a fuzzy snapshot
        # exact, whatever it holds). With it, the newest that holds no change after that point:
        # ZooKeeper's snapshots are fuzzy, one named zxid X can hold changes made after X while it was
        # written, and a past state must not hold any.
        # ZooKeeper writes a snapshot in place, in the background: in a running server's dataDir the
        # newest file can be unfinished. Like ZooKeeper, the one before it is then the base, but only
        # for the newest file, only when it ends early (damage, a checksum mismatch or a bad record,
        # stays an error) and, for the latest state, only when the logs reach its zxid.
        early: DecodeError | None = None
        name = os.path.basename(newest[1])
        for i, (snap_zxid, snap_path) in enumerate(reversed(snaps)):
            try:
                plan = self._prepare_from(snap_zxid, snap_path, logs, until, where)
            except DecodeError as e:
                if (snap_zxid, snap_path) != newest or i + 1 == len(snaps) or not _ends_early(e, snap_path):
                    raise
                early = e
                continue
            if early is not None and until is None and plan.last_zxid < newest[0]:
                raise SourceError(
                    where,
                    f"{name} ends early ({early.problem}) and the logs after {os.path.basename(snap_path)} "
                    f"stop at {plan.last_zxid:#x}, before its zxid: nothing here holds the tree at that time",
                ) from early
            # with ``until``, no change after its zxid, or after the last the logs replay up to its time
            if until is None or plan.newest_change <= (until[1] if until[0] == "zxid" else plan.last_zxid):
                if early is not None:
                    plan.skipped = f"{name}: ended early (ZooKeeper may still be writing it): {early.problem}"
                return plan
        raise SourceError(
            where,
            f"every snapshot at or before {self.until} already holds changes made after it (ZooKeeper "
            "writes snapshots while it works): the state at that point cannot be rebuilt from these files",
        )

    def _prepare_from(
        self,
        snap_zxid: int,
        snap_path: str,
        logs: list[tuple[int, str]],
        until: tuple[str, int] | None,
        where: str,
    ) -> SnapshotPlan:
        """The plan on the base snapshot ``snap_path``: replay the logs after it, index it."""
        # logs: every one from the newest whose first zxid <= the snapshot's, onwards
        older = [i for i, (z, _) in enumerate(logs) if z <= snap_zxid]
        chosen = logs[older[-1] if older else 0 :]
        roots = self._roots()
        clusters_root = self._clusters_root()
        wanted = tuple(r + "/" for r in roots.values()) + (
            (clusters_root + "/",) if clusters_root is not None else ()
        )
        log = _replay(chosen, snap_zxid, until, wanted)
        if until is not None and until[0] == "time" and log.last_time_ms is None:
            raise SourceError(
                where, f"{os.path.basename(snap_path)}: no transaction at or before {self.until} to date it"
            )
        reader = zkdata.SnapshotReader(snap_path)
        compressed = snap_path.endswith((".gz", ".snappy"))
        scan = self._scan(reader, log.overlay, compressed=compressed, dated=until is not None)
        self._add_logged(scan, log.overlay)
        return SnapshotPlan(
            snapshot=snap_path,
            snapshot_zxid=snap_zxid,
            logs=[p for _, p in chosen],
            last_zxid=log.last_zxid,
            last_time_ms=log.last_time_ms,
            replayed=log.replayed,
            compressed=compressed,
            acls=reader.acls,
            partitions=scan.parts,
            nodes=reader.node_count,
            bytes=os.path.getsize(snap_path),
            overlay=log.overlay,
            clusters=sorted(scan.clusters),
            present=frozenset(scan.present),
            newest_change=scan.newest_change,
        )

    def _clusters_root(self) -> str | None:
        """The full path of the clusters root when this store is a Pulsar one, else None."""
        if not any(s in PULSAR_STAGES for s in self.stages):
            return None
        return self.chroot.rstrip("/") + "/" + self.clusters_root.strip("/")

    def _scan(
        self, reader: zkdata.SnapshotReader, overlay: dict[str, _Change], *, compressed: bool, dated: bool
    ) -> _Scan:
        """One pass over the snapshot: checksum, and the byte ranges of each root's nodes (stepped over
        by their lengths: only the nodes under a root, a probe or the clusters root are looked at);
        with ``dated``, the newest change of those nodes too."""
        roots = self._roots()
        clusters_root = self._clusters_root()
        pulsar = clusters_root is not None
        scan = _Scan({s: [] for s in roots})
        parts, seen, present, clusters = scan.parts, scan.seen, scan.present, scan.clusters
        order = sorted(roots.items(), key=lambda kv: len(kv[1]), reverse=True)  # nested roots: deepest first
        probes = set(self.probes())

        # the open chunk: its stage, [start, end) and node count, and the overlay entries of its nodes
        cur: str | None = None
        start = end = count = 0
        changes: dict[str, _Change] = {}

        def flush() -> None:
            if cur is not None and count:
                parts[cur].append(_encode(("chunk", start, None if compressed else end, changes)))

        overlay_b = {p.encode(): p for p in overlay}
        probes_b = {p.encode(): p for p in probes}
        clusters_b = (clusters_root + "/").encode() if clusters_root else b""
        roots_b = [(st, r.encode(), (r + "/").encode()) for st, r in order]
        wanted_b = tuple(r for _, r, _ in roots_b) + tuple(probes_b) + ((clusters_b,) if pulsar else ())
        newest_change = 0
        for at, raw, data, _acl, stat in reader.records(tuple(p for p in wanted_b if p) or (b"/",)):
            if dated:  # czxid, mzxid and pzxid (a child created or deleted)
                zx = _STAT.unpack(stat)
                newest_change = max(newest_change, zx[0], zx[1], zx[8])
            if raw in probes_b:
                present.add(probes_b[raw])
            if pulsar and raw.startswith(clusters_b):
                text = raw.decode("utf-8", "replace")
                name = _cluster_of(text, clusters_root)
                if name is not None and not (text in overlay and overlay[text].deleted):
                    clusters.add(name)
            stage = None
            for st, r, rs in roots_b:
                if raw == r or raw.startswith(rs):
                    stage = st
                    break
            if stage is None:
                continue
            if stage != cur or (not compressed and count >= self.chunk_nodes):
                flush()
                cur, start, count, changes = stage, at, 0, {}
            end = at + 8 + len(raw) + len(data or b"") + 68  # the next record's offset
            count += 1
            key = overlay_b.get(raw)
            if key is not None:
                changes[key] = overlay[key]
                seen.add(key)
        flush()
        scan.newest_change = newest_change
        return scan

    def _add_logged(self, scan: _Scan, overlay: dict[str, _Change]) -> None:
        """Into ``scan``: the nodes the logs created (not in the snapshot, one more partition per stage),
        the clusters they created, and the probes they created or deleted."""
        roots = self._roots()
        clusters_root = self._clusters_root()
        order = sorted(roots.items(), key=lambda kv: len(kv[1]), reverse=True)  # nested roots: deepest first
        parts = scan.parts
        for stage, root in roots.items():
            extra = {
                p: c
                for p, c in overlay.items()
                if c.full
                and not c.deleted
                and p not in scan.seen
                and (p == root or p.startswith(root + "/"))
                and next((s for s, r in order if p == r or p.startswith(r + "/")), None) == stage
            }
            if extra:
                parts[stage].append(_encode(("created", 0, 0, extra)))
        scan.clusters.update(
            n
            for p, c in overlay.items()
            if c.full and not c.deleted and (n := _cluster_of(p, clusters_root)) is not None
        )
        probes = self.probes()
        for p, c in overlay.items():  # the logs' creations and deletions, and roots they wrote under
            if c.deleted:
                scan.present.discard(p)
            else:
                scan.present.update(q for q in probes if p == q or p.startswith(q + "/"))
        if "namespace_policies" in parts and len(parts["namespace_policies"]) > 1:
            parts["namespace_policies"] = [_encode(("all", parts["namespace_policies"]))]

    def check(self) -> None:
        self.prepare()

    def clusters(self) -> list[str] | None:
        if not any(s in PULSAR_STAGES for s in self.stages):
            return None
        return list(self.prepare().clusters)

    def reads(self) -> _SnapshotReads:
        """Point reads of the replayed tree (re-verification against this point in time)."""
        return _SnapshotReads(self)

    def describe(self) -> dict[str, Any]:
        p = self.prepare()
        return {
            **super().describe(),
            "as_of": "point in time",
            "snapshot": os.path.basename(p.snapshot),
            "snapshot_zxid": f"{p.snapshot_zxid:#x}",
            "logs": [os.path.basename(x) for x in p.logs],
            "replayed_transactions": p.replayed,
            "last_zxid": f"{p.last_zxid:#x}",
            "last_time_ms": p.last_time_ms,
            "until": self.until or None,
            "chroot": self.chroot or None,
            **({"skipped_snapshot": p.skipped} if p.skipped else {}),
        }

    def plan(self, stage: str) -> list[str]:
        p = self.prepare()
        head = f"{_encode(p.acls)}|{_encode(p.snapshot)}"
        return [f"{head}|{part}" for part in p.partitions.get(stage, [])]

    # -- executors ------------------------------------------------------------------------------
    def _nodes(
        self, snapshot: str, part: Any, root: str
    ) -> Iterator[tuple[zkdata.SnapshotNode, tuple[zkdata.Acl, ...] | None]]:
        """Nodes of one partition under ``root`` with the overlay applied; the ACL of log-created or
        changed nodes."""
        kind = part[0]
        if kind == "all":
            for sub in part[1]:
                yield from self._nodes(snapshot, _decode(sub), root)
            return
        _, start, stop, changes = part
        if kind == "created":
            for path, c in sorted(changes.items()):
                yield zkdata.SnapshotNode(path, c.data, _OPEN_ACL, zkdata.Stat(**c.stat), 0), c.acl
            return
        stat_of = zkdata.Stat._make
        unpack = _STAT.unpack
        reader = zkdata.SnapshotReader(snapshot, start=start, stop=stop)
        for at, raw, data, acl, stat in reader.records((root.encode(),)):
            try:
                path = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DecodeError(f"{snapshot} offset {at}", "node path is not UTF-8") from e
            c = changes.get(path) if changes else None
            if c is None:
                yield zkdata.SnapshotNode(path, data, acl, stat_of(unpack(stat)), at), None
            elif not c.deleted:
                if c.full:
                    yield zkdata.SnapshotNode(path, c.data, _OPEN_ACL, zkdata.Stat(**c.stat), at), c.acl
                else:
                    yield _merge(zkdata.SnapshotNode(path, data, acl, stat_of(unpack(stat)), at), c), c.acl

    def read(
        self, stage: str, partitions: Sequence[str], *, rate_limit: float | None, stats: Counter[str]
    ) -> Iterator[Row]:
        roots = self._roots()
        for text in partitions:
            acl_text, snap_text, part_text = text.split("|", 2)
            acls: dict[int, list[zkdata.Acl]] = _decode(acl_text)
            snapshot: str = _decode(snap_text)
            ok = _Readable(acls)
            nodes = ((n, ok(n.acl, a)) for n, a in self._nodes(snapshot, _decode(part_text), roots[stage]))
            yield from snapshot_rows(
                stage, roots[stage], self.chroot.rstrip("/"), nodes, stats, self.location
            )


def _acl_of(
    index: int, override: tuple[zkdata.Acl, ...] | None, acls: dict[int, list[zkdata.Acl]]
) -> tuple[zkdata.Acl, ...] | list[zkdata.Acl] | None:
    """The ACL list of a node: set by the logs, else the snapshot's list (None: open to anyone)."""
    if override is not None:
        return override
    return None if index == _OPEN_ACL else acls.get(index, [])


class _Readable:
    """``(acl index, ACL set by the logs) -> readable by world:anyone``, once per ACL list of the
    snapshot (most nodes share a few)."""

    def __init__(self, acls: dict[int, list[zkdata.Acl]]) -> None:
        self.acls = acls
        self.known: dict[int, bool] = {}

    def __call__(self, index: int, override: tuple[zkdata.Acl, ...] | None) -> bool:
        if override is not None:
            return zkdata.readable_by_anyone(override)
        got = self.known.get(index)
        if got is None:
            got = self.known[index] = zkdata.readable_by_anyone(_acl_of(index, None, self.acls))
        return got


class _SnapshotReads:
    """``get_many(paths)`` over the replayed tree: one pass over the snapshot per call (paths are
    relative to the chroot, as the live store's); ``read_many`` asks several sources at once."""

    def __init__(self, source: ZooKeeperSnapshot) -> None:
        self.source = source

    def __enter__(self) -> _SnapshotReads:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def get_many(self, paths: Iterable[str]) -> dict[str, Any]:
        """{path: data bytes, or None when the node does not exist}; unreadable ACLs read as NoAuth."""
        return read_many([(self.source, paths)])[0]


def read_many(requests: Sequence[tuple[ZooKeeperSnapshot, Iterable[str]]]) -> list[dict[str, Any]]:
    """``get_many`` of each (source, paths) request, in one pass over each snapshot file: the
    BookKeeper and Pulsar sources of one data directory (each with its own replayed changes) share
    the pass instead of reading the file once each."""
    from kazoo.exceptions import NoAuthError  # kazoo: the live scan's error type, bookie reads only

    plans = [source.prepare() for source, _ in requests]
    outs: list[dict[str, Any]] = []
    by_file: dict[str, dict[str, list[tuple[int, str]]]] = {}  # file -> full path -> (request, path)
    for i, ((source, paths), plan) in enumerate(zip(requests, plans, strict=True)):
        chroot = source.chroot.rstrip("/")
        wanted = {chroot + p: p for p in dict.fromkeys(paths)}
        outs.append(dict.fromkeys(wanted.values()))
        for full, rel in wanted.items():
            change = plan.overlay.get(full)
            if change is not None and change.full and not change.deleted:
                ok = zkdata.readable_by_anyone(change.acl)
                outs[i][rel] = (change.data or b"") if ok else NoAuthError()
            by_file.setdefault(plan.snapshot, {}).setdefault(full, []).append((i, rel))
    for snapshot, wanted_at in by_file.items():
        prefixes = tuple(p.encode() for p in wanted_at)
        for node in zkdata.SnapshotReader(snapshot).nodes_under(prefixes):
            for i, rel in wanted_at.get(node.path, ()):
                plan = plans[i]
                c = plan.overlay.get(node.path)
                if c is not None and (c.deleted or c.full):
                    continue
                ok = zkdata.readable_by_anyone(_acl_of(node.acl, c.acl if c is not None else None, plan.acls))
                data = c.data if c is not None and c.has_data else node.data
                outs[i][rel] = (data or b"") if ok else NoAuthError()
    return outs
