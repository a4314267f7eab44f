"""Which stores an audit reads: BookKeeper's metadata and one or more Pulsar metadata stores.

A store is written ``KIND:LOCATION`` (``--bookkeeper-metadata``, ``--pulsar-metadata``):

==============================================  ==============================================
``zk:HOST:PORT[,HOST:PORT...][/CHROOT]``        a live ZooKeeper, as Pulsar's ``metadataStoreUrl``
                                                (Pulsar store: ``/CHROOT`` prefixes
                                                ``/managed-ledgers``, ``/schemas``,
                                                ``/admin/policies``; BookKeeper store: the path is
                                                the ledgers root, default ``/ledgers``)
``metadata-store:zk:...``, ``zk+hierarchical://HOST:PORT/PATH`` (also ``zk+null``,
``zk+longhierarchical``, ``zk+flat``)            the same, as broker.conf / bookkeeper.conf write it
``admin:http(s)://HOST:PORT``                   a Pulsar store read through the broker's admin
                                                REST API (``ledgerlens.sources.admin``; Pulsar
                                                stores only: BookKeeper's ledgers come from its
                                                metadata store)
==============================================  ==============================================

References are the union over every Pulsar store; tenants found in any of them are owned by the
audited cluster (``ledgerlens.audit.ownership``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from ledgerlens.errors import ConfigError
from ledgerlens.settings.config import ZooKeeperSource
from ledgerlens.sources.admin import AdminApi, AdminSource, parse_admin_url
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES, InventorySource
from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot
from ledgerlens.sources.zookeeper import LiveZooKeeper

__all__ = ["SOURCE_KINDS", "Stores", "parse_store"]

SOURCE_KINDS = ("zk", "zk-snapshot", "admin")
_BK_URI = re.compile(r"^zk(\+[a-z]+)?://(?P<hosts>[^/]+)(?P<path>/.*)?$")


def _split_zk(text: str) -> tuple[str, str]:
    """``host:port[,host:port]/path`` -> (hosts, path or "")."""
    i = text.find("/")
    hosts, path = (text, "") if i < 0 else (text[:i], text[i:].rstrip("/"))
    if not hosts or not all(re.fullmatch(r"[^:,\s]+(:\d+)?", h) for h in hosts.split(",")):
        raise ConfigError(f"metadata store {text!r}: expected host:port[,host:port...][/path]")
    return hosts, path


def parse_store(
    text: str,
    role: str,
    base: ZooKeeperSource | None = None,
    *,
    until: str = "",
    admin: AdminApi | None = None,
) -> InventorySource:
    """The source of one ``--bookkeeper-metadata`` (``role="bookkeeper"``) or ``--pulsar-metadata``
    (``role="pulsar"``) value; ``base`` supplies the scan settings (rate limit, tasks, roots),
    ``until`` the point in time of snapshot stores (``--zk-until``), ``admin`` the credentials
    and TLS settings of admin stores (its URL is replaced by the store's)."""
    t = text.strip()
    if t.startswith("metadata-store:"):
        t = t[len("metadata-store:") :]
    m = _BK_URI.match(t)
    if m:
        t = f"zk:{m.group('hosts')}{m.group('path') or ''}"
    kind, sep, rest = t.partition(":")
    if not sep or kind not in SOURCE_KINDS:
        raise ConfigError(
            f"metadata store {text!r}: expected KIND:LOCATION with KIND one of {', '.join(SOURCE_KINDS)}"
        )
    if kind == "zk-snapshot":
        data_dir, _, path = rest.partition("#")
        if not data_dir:
            raise ConfigError(f"metadata store {text!r}: expected zk-snapshot:DATA_DIR[#PATH]")
        if path and not path.startswith("/"):
            raise ConfigError(f"metadata store {text!r}: the path after '#' must start with '/'")
        if role == "bookkeeper":
            return ZooKeeperSnapshot(
                data_dir, until=until, ledgers_root=path or "/ledgers", provides=BOOKKEEPER_STAGES
            )
        return ZooKeeperSnapshot(data_dir, until=until, chroot=path.rstrip("/"), provides=PULSAR_STAGES)
    if kind == "admin":
        if role != "pulsar":
            raise ConfigError(
                f"metadata store {text!r}: the admin API holds no BookKeeper ledger metadata; "
                "give BookKeeper's metadata store (zk:HOST:PORT/ledgers or zk-snapshot:DIR)"
            )
        return AdminSource(replace(admin or AdminApi(url=""), url=parse_admin_url(rest)))
    if kind != "zk":
        raise ConfigError(f"metadata store {text!r}: source kind {kind!r} is not available here yet")
    hosts, path = _split_zk(rest)
    cfg = base or ZooKeeperSource(hosts=hosts)
    if role == "bookkeeper":
        return LiveZooKeeper(replace(cfg, hosts=hosts, ledgers_root=path or "/ledgers"), BOOKKEEPER_STAGES)
    if role == "pulsar":
        return LiveZooKeeper(replace(cfg, hosts=hosts + path), PULSAR_STAGES)
    raise ValueError(role)


def _role(src: InventorySource | None, stages: tuple[str, ...]) -> InventorySource:
    """The same store limited to one role's stages."""
    assert isinstance(src, LiveZooKeeper | ZooKeeperSnapshot)
    return replace(src, provides=stages)


@dataclass(frozen=True)
class Stores:
    """The BookKeeper metadata store and the Pulsar metadata stores of one audit."""

    bookkeeper: InventorySource
    pulsar: tuple[InventorySource, ...]

    @classmethod
    def single(cls, zk: ZooKeeperSource) -> Stores:
        """One live ZooKeeper holding both (``--zookeeper``, as Pulsar's default set-up)."""
        both = LiveZooKeeper(zk)
        return cls(both, (both,))

    @classmethod
    def parse(
        cls,
        bookkeeper: str,
        pulsar: list[str] | tuple[str, ...],
        base: ZooKeeperSource | None = None,
        *,
        until: str = "",
        admin: AdminApi | None = None,
    ) -> Stores:
        """From ``--bookkeeper-metadata`` and the ``--pulsar-metadata`` values."""
        if not pulsar:
            raise ConfigError("--pulsar-metadata KIND:LOCATION is required with --bookkeeper-metadata")
        return cls(
            parse_store(bookkeeper, "bookkeeper", base, until=until),
            tuple(parse_store(p, "pulsar", base, until=until, admin=admin) for p in pulsar),
        )

    @classmethod
    def from_options(
        cls,
        zookeeper: str = "",
        *,
        source: str = "zk",
        ledgers_root: str = "/ledgers",
        bookkeeper: str = "",
        pulsar: list[str] | tuple[str, ...] = (),
        zk_data_dir: str = "",
        zk_until: str = "",
        base: ZooKeeperSource | None = None,
        admin_url: str = "",
        admin: AdminApi | None = None,
    ) -> Stores:
        """The stores of the CLI / runbook options.

        ``--source`` says how the default store is read: ``zk`` scans ``--zookeeper`` live;
        ``zk-snapshot`` reads ``--zk-data-dir`` (the chroot of ``--zookeeper``, if any, selects the
        cluster's tree) up to ``--zk-until``. That one store holds BookKeeper's ledgers (under
        ``ledgers_root``) and Pulsar's metadata; ``--bookkeeper-metadata`` and ``--pulsar-metadata``
        replace the role they name. ``admin`` reads Pulsar's metadata through the admin API at
        ``admin_url`` (``--admin-url``; ``admin`` holds its token reference and TLS settings) and
        BookKeeper's ledgers from ``--bookkeeper-metadata``, else from ``--zookeeper``.
        """
        if source not in SOURCE_KINDS:
            raise ConfigError(f"--source {source!r}: expected one of {', '.join(SOURCE_KINDS)}")
        default: InventorySource | None = None

        def live(hosts: str) -> LiveZooKeeper:
            return LiveZooKeeper(
                replace(base or ZooKeeperSource(hosts=hosts), hosts=hosts, ledgers_root=ledgers_root)
            )

        chroot = zookeeper[zookeeper.index("/") :].rstrip("/") if "/" in zookeeper else ""
        if source == "zk-snapshot":
            if zk_data_dir:
                default = ZooKeeperSnapshot(
                    zk_data_dir, until=zk_until, chroot=chroot, ledgers_root=ledgers_root
                )
            elif not (bookkeeper and pulsar):
                raise ConfigError("--source zk-snapshot needs --zk-data-dir DIR (ZooKeeper's dataDir)")
        elif source == "admin":
            if not admin_url and not pulsar:
                raise ConfigError("--source admin needs --admin-url URL (setting pulsar.admin-url)")
            if not bookkeeper and not zookeeper:
                raise ConfigError(
                    "--source admin reads BookKeeper's ledgers from its metadata store: "
                    "give --bookkeeper-metadata zk:HOST:PORT/ledgers or --zookeeper"
                )
            if not bookkeeper:  # the live scan of --zookeeper (chroot included) in BookKeeper's role
                default = live(zookeeper)
            if not pulsar:
                pulsar = [f"admin:{admin_url}"]
        elif zookeeper:
            default = live(zookeeper)
        if (
            zk_until
            and source != "zk-snapshot"
            and not any(x.startswith("zk-snapshot:") for x in (bookkeeper, *pulsar))
        ):
            raise ConfigError("--zk-until applies to ZooKeeper snapshots only (--source zk-snapshot)")
        if default is not None and not bookkeeper and not pulsar:
            return cls(default, (default,))
        if not bookkeeper and default is None:
            raise ConfigError("no BookKeeper metadata store: give --bookkeeper-metadata or --zookeeper")
        if not pulsar and default is None:
            raise ConfigError("no Pulsar metadata store: give --pulsar-metadata or --zookeeper")
        bk = (
            parse_store(bookkeeper, "bookkeeper", base, until=zk_until)
            if bookkeeper
            else _role(default, BOOKKEEPER_STAGES)
        )
        ps = (
            tuple(parse_store(p, "pulsar", base, until=zk_until, admin=admin) for p in pulsar)
            if pulsar
            else (_role(default, PULSAR_STAGES),)
        )
        return cls(bk, ps)

    def sources(self) -> list[InventorySource]:
        """Every distinct source, BookKeeper's first."""
        out: list[InventorySource] = [self.bookkeeper]
        for p in self.pulsar:
            if p is not self.bookkeeper:
                out.append(p)
        return out

    def live_zookeeper(self) -> tuple[Any, list[Any]] | None:
        """(BookKeeper store, Pulsar stores) for re-verification: live ZooKeepers as their
        ``ZooKeeperSource``, snapshots as themselves (read at their point in time); None when a
        store cannot be re-read (admin APIs)."""

        def one(src: InventorySource) -> Any:
            if isinstance(src, AdminSource):  # read again through the API (AdminSource.reads)
                return src
            if isinstance(src, LiveZooKeeper):
                return src.zk
            if isinstance(src, ZooKeeperSnapshot):  # pinned to the state the inventory read
                return src.pinned()
            return None

        bk = one(self.bookkeeper)
        pulsar = [one(p) for p in self.pulsar]
        if bk is None or any(p is None for p in pulsar):
            return None
        return bk, pulsar

    def describe(self) -> dict[str, object]:
        """For ``summary.json``: each store's kind, location and point in time."""
        return {"bookkeeper": self.bookkeeper.describe(), "pulsar": [p.describe() for p in self.pulsar]}
