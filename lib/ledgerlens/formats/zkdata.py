"""ZooKeeper's on-disk data: snapshots (``snapshot.<zxid>``) and transaction logs (``log.<zxid>``).

Both are jute binary archives (big-endian ints and longs, ``int length + bytes`` buffers and
strings, -1 for null).

Snapshot (optionally gzip'ed ``.gz`` or snappy-java framed ``.snappy``, by
``zookeeper.snapshot.compression.method``)::

    int magic "ZKSN", int version (2), long dbid
    int sessions; per session: long id, int timeout
    int acl lists; per list: long index, int count, count x (int perms, string scheme, string id)
    per node, parents before children: string path ("" is the root), buffer data, long acl index,
        StatPersisted (long czxid, mzxid, ctime, mtime; int version, cversion, aversion;
        long ephemeralOwner, pzxid)
    string "/" (end of nodes), long Adler-32 of every byte before it, string "/"
    [ZxidDigest (long zxid, int version, long digest), long Adler-32, string "/"]
    [long lastProcessedZxid, long Adler-32, string "/"]

Transaction log (preallocated: a zero-filled tail follows the last record)::

    int magic "ZKLG", int version (2), long dbid
    per record: long Adler-32 of the entry, buffer entry, byte 'B'
    entry: TxnHeader (long clientId, int cxid, long zxid, long time, int type), the type's
        record, [TxnDigest]

A length of 0 (the preallocated zeros) ends a log. Any other damage raises :class:`DecodeError`
naming the file and the byte offset; a snapshot is complete only when its checksum matches.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ledgerlens.errors import DecodeError

__all__ = [
    "OP_NAMES",
    "Acl",
    "LogRecord",
    "Op",
    "Stat",
    "SnapshotNode",
    "SnapshotReader",
    "open_snapshot_stream",
    "read_log",
    "readable_by_anyone",
]

SNAP_MAGIC = 0x5A4B534E  # "ZKSN"
LOG_MAGIC = 0x5A4B4C47  # "ZKLG"
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_HEADER = struct.Struct(">iiq")
_STAT = STAT = struct.Struct(">qqqqiiiqq")  # StatPersisted
_TXN_HEADER = struct.Struct(">qiqqi")
_CHUNK = 4 << 20
_SNAPPY_MAGIC = b"\x82SNAPPY\x00"

# ZooDefs.OpCode values that change the tree (and the ones a log may hold that do not).
CREATE, DELETE, SET_DATA, SET_ACL, CHECK, MULTI = 1, 2, 5, 7, 13, 14
CREATE2, RECONFIG, CREATE_CONTAINER, DELETE_CONTAINER, CREATE_TTL = 15, 16, 19, 20, 21
CREATE_SESSION, CLOSE_SESSION, ERROR = -10, -11, -1
OP_NAMES = {
    CREATE: "create",
    DELETE: "delete",
    SET_DATA: "setData",
    SET_ACL: "setACL",
    CHECK: "check",
    MULTI: "multi",
    CREATE2: "create2",
    RECONFIG: "reconfig",
    CREATE_CONTAINER: "createContainer",
    DELETE_CONTAINER: "deleteContainer",
    CREATE_TTL: "createTTL",
    CREATE_SESSION: "createSession",
    CLOSE_SESSION: "closeSession",
    ERROR: "error",
}
READ = 1  # ZooDefs.Perms.READ


class Stat(NamedTuple):
    """A znode's persisted stat (``StatPersisted``); times in epoch ms."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    pzxid: int


class Acl(NamedTuple):
    """One ACL entry: permission bits and the id (scheme, id)."""

    perms: int
    scheme: str
    id: str


class SnapshotNode(NamedTuple):
    """One node of a snapshot: its path, data, ACL list index and stat; ``offset`` of its record."""

    path: str
    data: bytes | None
    acl: int
    stat: Stat
    offset: int


class Readable(Protocol):
    """What the readers need of a stream."""

    def read(self, n: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


# -- streams -------------------------------------------------------------------------------------
def _snappy_java_chunks(raw: Readable, name: str) -> Iterator[bytes]:
    """Decompressed blocks of a snappy-java ``SnappyOutputStream`` file (magic, versions, then
    ``int length + raw snappy block`` frames)."""
    import cramjam  # cramjam: only for .snappy snapshots

    head = raw.read(16)
    if head[:8] != _SNAPPY_MAGIC:
        raise DecodeError(f"{name} offset 0", "not a snappy-java stream (bad magic)")
    offset = 16
    while True:
        n = raw.read(4)
        if not n:
            return
        if len(n) < 4:
            raise DecodeError(f"{name} offset {offset}", "truncated snappy block length")
        (size,) = _I.unpack(n)
        block = raw.read(size)
        if size < 0 or len(block) != size:
            raise DecodeError(
                f"{name} offset {offset}", f"truncated snappy block ({len(block)} of {size} bytes)"
            )
        try:
            yield bytes(cramjam.snappy.decompress_raw(block))
        except Exception as e:  # noqa: BLE001 - cramjam raises its own error type
            raise DecodeError(f"{name} offset {offset}", f"corrupt snappy block: {e}") from e
        offset += 4 + size


class _ChunkStream:
    """A readable over an iterator of byte chunks (for snappy)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buf += nxt
        if n < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def close(self) -> None:
        pass


def open_snapshot_stream(path: str) -> Readable:
    """The uncompressed byte stream of a snapshot file (compression from its name, as ZooKeeper)."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".snappy"):
        raw = open(path, "rb")  # noqa: SIM115 - closed with the stream's owner
        return _ChunkStream(_snappy_java_chunks(raw, path))
    return open(path, "rb")  # noqa: SIM115


class _Reader:
    """Buffered jute reads over a stream, tracking the absolute offset and an Adler-32 of consumed bytes."""

    def __init__(self, stream: Readable, name: str, *, offset: int = 0, checksum: bool = True) -> None:
        self.stream = stream
        self.name = name
        self.buf = b""
        self.pos = 0
        self.base = offset  # absolute offset of buf[0]
        self.adler = 1
        self.checksum = checksum
        self.eof = False

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def fail(self, problem: str, at: int | None = None) -> DecodeError:
        return DecodeError(f"{self.name} offset {self.offset if at is None else at}", problem)

    def fill(self, n: int) -> bool:
        """Make ``n`` bytes available from ``pos``; False at a clean end of stream."""
        if len(self.buf) - self.pos >= n:
            return True
        if self.checksum and self.pos:
            self.adler = zlib.adler32(self.buf[: self.pos], self.adler)
        self.base += self.pos
        rest = [self.buf[self.pos :]]
        have = len(rest[0])
        self.pos = 0
        while have < n and not self.eof:
            try:
                chunk = self.stream.read(max(_CHUNK, n - have))
            except (OSError, EOFError, zlib.error) as e:
                raise self.fail(f"unreadable: {type(e).__name__}: {e}", self.base + have) from e
            if not chunk:
                self.eof = True
                break
            rest.append(chunk)
            have += len(chunk)
        self.buf = b"".join(rest)
        return have >= n

    def need(self, n: int, what: str) -> None:
        if not self.fill(n):
            raise self.fail(f"truncated: {what} needs {n} bytes, {len(self.buf) - self.pos} left")

    def checksum_so_far(self) -> int:
        return zlib.adler32(self.buf[: self.pos], self.adler)

    def i32(self, what: str) -> int:
        self.need(4, what)
        (v,) = _I.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(v)

    def i64(self, what: str) -> int:
        self.need(8, what)
        (v,) = _Q.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(v)

    def buffer(self, what: str, limit: int = 1 << 30) -> bytes | None:
        n = self.i32(what)
        if n < 0:
            return None
        if n > limit:
            raise self.fail(f"implausible {what} length {n}", self.offset - 4)
        self.need(n, what)
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def string(self, what: str) -> str | None:
        b = self.buffer(what, 1 << 24)
        if b is None:
            return None
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not UTF-8", self.offset - len(b)) from e

    def acl_list(self, what: str) -> list[Acl]:
        n = self.i32(what)
        if n < 0:
            return []
        if n > 1 << 16:
            raise self.fail(f"implausible {what} count {n}", self.offset - 4)
        return [
            Acl(self.i32("acl perms"), self.string("acl scheme") or "", self.string("acl id") or "")
            for _ in range(n)
        ]


# -- snapshots -----------------------------------------------------------------------------------
@dataclass
class SnapshotReader:
    """Stream a snapshot's nodes in file order, in constant memory per node.

    ``nodes()`` yields every node and, once the node list ends, checks the seal (Adler-32): a
    snapshot whose checksum does not match, or that ends early, raises :class:`DecodeError`
    naming the file and offset. ``acls`` (index -> ACL list) and ``sessions`` are read first.
    With ``start`` (a node offset recorded in an earlier full pass) reading begins there, without
    the header, sessions, ACLs or the checksum.
    """

    path: str
    start: int | None = None
    stop: int | None = None

    def __post_init__(self) -> None:
        self.acls: dict[int, list[Acl]] = {}
        self.sessions = 0
        self.dbid = 0
        self.version = 0
        self.trailer: dict[str, int] = {}
        self.end_offset = 0
        self.node_count = 0  # nodes stepped over by the last read

    def _open(self) -> _Reader:
        stream = open_snapshot_stream(self.path)
        if self.start is None:
            return _Reader(stream, self.path)
        if hasattr(stream, "seek") and not self.path.endswith((".gz", ".snappy")):
            stream.seek(self.start)
        else:  # compressed: no random access, skip up to the node
            left = self.start
            while left:
                got = stream.read(min(left, _CHUNK))
                if not got:
                    raise DecodeError(
                        f"{self.path} offset {self.start - left}", "truncated before a recorded node"
                    )
                left -= len(got)
        return _Reader(stream, self.path, offset=self.start, checksum=False)

    def _header(self, r: _Reader) -> None:
        r.need(_HEADER.size, "file header")
        magic, self.version, self.dbid = _HEADER.unpack_from(r.buf, r.pos)
        if magic != SNAP_MAGIC:
            raise r.fail(f"not a ZooKeeper snapshot (magic {magic:#010x}, expected 'ZKSN')")
        if self.version != 2:
            raise r.fail(f"unknown snapshot version {self.version} (this release reads 2)")
        r.pos += _HEADER.size
        n = r.i32("session count")
        if n < 0 or n > 1 << 26:
            raise r.fail(f"implausible session count {n}", r.offset - 4)
        for _ in range(n):
            r.i64("session id")
            r.i32("session timeout")
        self.sessions = n
        lists = r.i32("ACL cache size")
        if lists < 0 or lists > 1 << 24:
            raise r.fail(f"implausible ACL cache size {lists}", r.offset - 4)
        for _ in range(lists):
            idx = r.i64("ACL index")
            self.acls[idx] = r.acl_list("ACL list")

    def nodes(self) -> Iterator[SnapshotNode]:
        """Every node (see the class docstring); the seal is checked after the last one."""
        return self.nodes_under(None)

    def nodes_under(self, prefixes: tuple[bytes, ...] | None) -> Iterator[SnapshotNode]:
        """The nodes whose path starts with one of ``prefixes`` (UTF-8; every node when None)."""
        stat_unpack = _STAT.unpack
        make = Stat._make
        for at, path, data, acl, stat in self.records(prefixes):
            try:
                text = path.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DecodeError(f"{self.path} offset {at}", "node path is not UTF-8") from e
            yield SnapshotNode(text, data, acl, make(stat_unpack(stat)), at)

    def records(
        self, prefixes: tuple[bytes, ...] | None = None
    ) -> Iterator[tuple[int, bytes, bytes | None, int, bytes]]:
        """Raw node records in file order: ``(offset, path, data, acl index, stat)``.

        ``path`` is the UTF-8 path and ``stat`` the 60 bytes of ``StatPersisted`` (see ``Stat``),
        both undecoded. With ``prefixes``, only the nodes whose path starts with one of them are
        yielded; the others are stepped over by their lengths alone (no object per node). The seal
        is checked as by :meth:`nodes` when the whole node list is read.
        """
        r = self._open()
        try:
            if self.start is None:
                self._header(r)
            stop = self.stop
            unpack_i = _I.unpack_from
            unpack_q = _Q.unpack_from
            sized = _STAT.size + 8  # ACL index and stat after the data
            done = False
            count = 0
            while not done:
                buf, pos, base = r.buf, r.pos, r.base
                n = len(buf)
                need = 4
                while True:  # every complete record held in buf
                    if pos + 4 > n:
                        need = 4
                        break
                    if stop is not None and base + pos >= stop:
                        r.pos = pos
                        return
                    (plen,) = unpack_i(buf, pos)
                    if plen < 0 or plen > 1 << 24:
                        r.pos = pos
                        raise r.fail("null node path" if plen < 0 else f"implausible node path length {plen}")
                    pe = pos + 4 + plen
                    if pe + 4 > n:
                        need = plen + 8
                        break
                    if plen == 1 and buf[pos + 4] == 0x2F:  # "/": the end of the node list
                        pos = pe
                        done = True
                        break
                    (dlen,) = unpack_i(buf, pe)
                    if dlen > 1 << 30:
                        r.pos = pos
                        raise r.fail(f"implausible node data length {dlen}", base + pe)
                    de = pe + 4 + (dlen if dlen > 0 else 0)
                    end = de + sized
                    if end > n:
                        need = end - pos
                        break
                    if prefixes is None or buf.startswith(prefixes, pos + 4, pe):
                        (acl,) = unpack_q(buf, de)
                        yield (
                            base + pos,
                            buf[pos + 4 : pe],
                            buf[pe + 4 : de] if dlen >= 0 else None,
                            acl,
                            buf[de + 8 : end],
                        )
                    pos = end
                    count += 1
                r.pos = pos
                self.node_count = count
                if not done and not r.fill(need):
                    raise r.fail(f"truncated: a node record needs {need} bytes, {len(r.buf) - r.pos} left")
            if self.start is not None:
                return
            self._seal(r, "node list")
            self.end_offset = r.offset
            self._trailer(r)
        finally:
            r.stream.close()

    def _seal(self, r: _Reader, what: str) -> None:
        expected = r.checksum_so_far()
        got = r.i64(f"checksum after the {what}") & 0xFFFFFFFF
        if got != expected:
            raise r.fail(
                f"checksum mismatch after the {what} (file {got:#x}, computed {expected:#x}): corrupt",
                r.offset - 8,
            )
        if r.string("seal") != "/":
            raise r.fail(f"bad seal after the {what}")

    def _trailer(self, r: _Reader) -> None:
        """The optional digest (3.6+) and last processed zxid (3.9+), each sealed."""
        if not r.fill(20):
            return
        zxid = r.i64("digest zxid")
        version = r.i32("digest version")
        if version < 2:
            r.string("digest")
        else:
            r.i64("digest")
        self._seal(r, "digest")
        self.trailer["digest_zxid"] = zxid
        if not r.fill(8):
            return
        self.trailer["last_processed_zxid"] = r.i64("last processed zxid")
        self._seal(r, "last processed zxid")


# -- transaction logs ----------------------------------------------------------------------------
class Op(NamedTuple):
    """One change to the tree: ``kind`` is create, delete, setData or setACL."""

    kind: str
    path: str
    data: bytes | None = None
    acl: tuple[Acl, ...] = ()
    version: int = 0
    ephemeral_owner: int = 0


class LogRecord(NamedTuple):
    """One transaction: header fields and the tree changes it makes (a multi expanded)."""

    zxid: int
    time_ms: int
    session: int
    type: int
    ops: tuple[Op, ...]
    offset: int


def _record_ops(r: _Reader, type_: int, session: int) -> list[Op]:
    """The tree changes of one record of ``type_`` read from ``r``."""
    if type_ in (CREATE, CREATE2, CREATE_CONTAINER, CREATE_TTL):
        path = r.string("create path") or ""
        data = r.buffer("create data")
        acl = tuple(r.acl_list("create ACL"))
        owner = 0
        if type_ in (CREATE, CREATE2):
            r.need(1, "ephemeral flag")
            ephemeral = r.buf[r.pos]
            r.pos += 1
            r.i32("parent cversion")
            owner = session if ephemeral else 0
        elif type_ == CREATE_CONTAINER:
            r.i32("parent cversion")
            owner = -(1 << 63)  # EphemeralType.CONTAINER_EPHEMERAL_OWNER
        else:
            r.i32("parent cversion")
            r.i64("ttl")
        return [Op("create", path, data, acl, 0, owner)]
    if type_ in (DELETE, DELETE_CONTAINER):
        return [Op("delete", r.string("delete path") or "")]
    if type_ in (SET_DATA, RECONFIG):
        path = r.string("setData path") or ""
        data = r.buffer("setData data")
        return [Op("setData", path, data, (), r.i32("setData version"))]
    if type_ == SET_ACL:
        path = r.string("setACL path") or ""
        acl = tuple(r.acl_list("setACL ACL"))
        return [Op("setACL", path, None, acl, r.i32("setACL version"))]
    if type_ == CLOSE_SESSION:
        if not r.fill(4):
            return []
        n = r.i32("closeSession paths")
        return [Op("delete", r.string("closeSession path") or "") for _ in range(max(n, 0))]
    if type_ == MULTI:
        out: list[Op] = []
        n = r.i32("multi count")
        subs = []
        for _ in range(max(n, 0)):
            subs.append((r.i32("multi op type"), r.buffer("multi op") or b""))
        if any(t == ERROR for t, _ in subs):
            return []  # a failed multi changes nothing
        for t, body in subs:
            sub = _Reader(_BytesStream(body), r.name, offset=r.offset, checksum=False)
            out.extend(_record_ops(sub, t, session))
        return out
    return []  # createSession, check, error, and reads: no tree change


class _BytesStream:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def read(self, n: int = -1) -> bytes:
        out, self._data = self._data or b"", None
        return out

    def close(self) -> None:
        pass


def read_log(path: str, *, tail_ok: bool = False, after: int | None = None) -> Iterator[LogRecord]:
    """Every transaction of one log file, in order; stops at the preallocated zero tail.

    ``tail_ok``: the file is the newest log of a running server; a record cut short at the very
    end (never acknowledged) ends it instead of raising. ``after``: records with a zxid at or
    before it are checked (length, terminator, checksum) but not decoded (their ``ops`` are empty).
    """
    with open(path, "rb") as f:
        r = _Reader(f, path, checksum=False)
        r.need(_HEADER.size, "file header")
        magic, version, _dbid = _HEADER.unpack_from(r.buf, r.pos)
        if magic != LOG_MAGIC:
            raise r.fail(f"not a ZooKeeper transaction log (magic {magic:#010x}, expected 'ZKLG')")
        if version != 2:
            raise r.fail(f"unknown transaction log version {version} (this release reads 2)")
        r.pos += _HEADER.size
        while True:
            at = r.offset
            if not r.fill(12):
                if r.fill(1) and any(r.buf[r.pos :]) and not tail_ok:
                    raise r.fail("truncated record header", at)
                return
            crc, size = struct.unpack_from(">qi", r.buf, r.pos)
            if size == 0:
                return  # the preallocated, zero-filled tail
            r.pos += 12
            if size < 0 or size > 1 << 30 or not r.fill(size + 1):
                if tail_ok and not r.fill(size + 1):
                    return
                raise r.fail(f"truncated or corrupt record (length {size})", at)
            entry = r.buf[r.pos : r.pos + size]
            if r.buf[r.pos + size] != 0x42:
                if tail_ok:
                    return
                raise r.fail("record not terminated by 'B': partial or corrupt", at)
            if zlib.adler32(entry) != crc & 0xFFFFFFFF:
                raise r.fail("record checksum mismatch: corrupt", at)
            r.pos += size + 1
            if size < _TXN_HEADER.size:
                raise r.fail("record shorter than its header", at)
            session, _cxid, zxid, time_ms, type_ = _TXN_HEADER.unpack_from(entry, 0)
            if after is not None and zxid <= after:
                yield LogRecord(zxid, time_ms, session, type_, (), at)
                continue
            sub = _Reader(
                _BytesStream(entry[_TXN_HEADER.size :]),
                path,
                offset=at + 12 + _TXN_HEADER.size,
                checksum=False,
            )
            try:
                ops = tuple(_record_ops(sub, type_, session))
            except DecodeError as e:
                raise r.fail(f"zxid {zxid:#x} ({OP_NAMES.get(type_, type_)}): {e.problem}", at) from e
            yield LogRecord(zxid, time_ms, session, type_, ops, at)


def readable_by_anyone(acl: list[Acl] | tuple[Acl, ...] | None) -> bool:
    """True when an anonymous client (``world:anyone``) may read a node with this ACL list."""
    if acl is None:
        return True
    return any(a.scheme == "world" and a.id == "anyone" and a.perms & READ for a in acl)
