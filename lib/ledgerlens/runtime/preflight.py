"""Check everything checkable before Spark starts, and fail in one line.

``preflight`` runs before a run starts Spark (the CLI, ``ledgerlens report``, the runbook): the
output directory, the connect strings, the Spark master, ZooKeeper (reachable within about 10 s,
the chroot and the cluster's structure: ``ledgerlens.audit.gates``), the Pulsar admin API of
``--source admin`` / ``admin:URL`` stores (a Pulsar admin API answering within about 3 s, and what
it holds: ``gates.check_admin_structure``) and the bucket (readable, with a hint naming the
credential sources boto3 looked at). Each failure is a ``ConfigError`` (a malformed setting) or a
``SourceError`` (a server), whose message names the setting or the server.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.runtime.outdir import check_writable
from ledgerlens.settings.config import S3Source, ZooKeeperSource
from ledgerlens.settings.redact import redact
from ledgerlens.sources.admin_client import ADMIN_TIMEOUT_S, AdminApi, AdminClient, admin_clusters, admin_get
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES
from ledgerlens.sources.reach import tcp_problem

ZK_TIMEOUT_S = 10.0  # the whole ZooKeeper check: resolve, connect, read the structure
S3_TIMEOUT_S = 10.0
SPARK_MASTER_TIMEOUT_S = 5.0
ADMIN_COUNT_S = 10.0  # then what it holds (tenants, namespaces, topics), for the plausibility gate
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)$")
_LOCAL_MASTER = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$|^local-cluster\[\d+,\s*\d+,\s*\d+\]$")


@dataclass(frozen=True)
class ConnectString:
    """A parsed ZooKeeper connect string."""

    servers: tuple[tuple[str, int], ...]
    chroot: str  # "" when none

    def server_list(self) -> str:
        return ",".join(f"{h}:{p}" for h, p in self.servers)


def parse_connect_string(hosts: str, *, option: str = "--zookeeper") -> ConnectString:
    """``host:port[,host:port...][/chroot]`` -> ``ConnectString``, or ``ConfigError`` saying what is wrong."""
    text = (hosts or "").strip()
    if not text:
        raise ConfigError(f"{option}: empty connect string (expected host:port[,host:port][/chroot])")
    servers_part, slash, chroot = text.partition("/")
    chroot = slash + chroot if slash else ""
    servers: list[tuple[str, int]] = []
    for item in servers_part.split(","):
        item = item.strip()
        host, colon, port = item.rpartition(":")
        if not colon:
            host, port = item, "2181"
        if not host or not _HOST.match(host):
            raise ConfigError(f"{option} {hosts!r}: bad host {host or item!r} (expected host:port)")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"{option} {hosts!r}: bad port {port!r} in {item!r} (expected 1-65535)")
        servers.append((host.strip("[]"), int(port)))
    if chroot:
        if chroot != "/" and (chroot.endswith("/") or "//" in chroot):
            raise ConfigError(f"{option} {hosts!r}: bad chroot {chroot!r} (expected /name[/name...])")
        if chroot == "/":
            chroot = ""
    return ConnectString(tuple(servers), chroot)


def check_path(option: str, path: str) -> None:
    """A ZooKeeper path setting (``--ledgers-root``): absolute, no trailing or double slash."""
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path:
        raise ConfigError(f"{option} {path!r}: expected an absolute ZooKeeper path such as /ledgers")


def check_spark_master(master: str) -> None:
    """A well-formed Spark master; a ``spark://`` or ``k8s://`` master must accept a TCP connection."""
    m = (master or "").strip()
    if not m or _LOCAL_MASTER.match(m) or m == "yarn":
        if not m:
            raise ConfigError(
                "--spark-master: empty (expected local[*], spark://host:port, yarn or k8s://...)"
            )
        return
    if m.startswith("spark://"):
        targets: list[tuple[str, int]] = []
        for item in m[len("spark://") :].split(","):
            host, _, port = item.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"--spark-master {master!r}: expected spark://host:port")
            targets.append((host, int(port)))
    elif m.startswith("k8s://"):
        url = urlsplit(m[len("k8s://") :] if "://" in m[len("k8s://") :] else "https://" + m[len("k8s://") :])
        if not url.hostname:
            raise ConfigError(f"--spark-master {master!r}: expected k8s://https://host:port")
        targets = [(url.hostname, url.port or 443)]
    else:
        raise ConfigError(
            f"--spark-master {master!r}: unknown master (expected local[*], spark://host:port, yarn or k8s://...)"
        )
    problems = []
    for target_host, target_port in targets:
        problem = tcp_problem(target_host, target_port, SPARK_MASTER_TIMEOUT_S)
        if problem is None:
            return
        problems.append(f"{target_host}:{target_port} {problem}")
    raise SourceError(f"spark master {master}", "unreachable: " + "; ".join(problems))


def check_s3_endpoint(endpoint: str) -> None:
    """A well-formed S3 endpoint URL without credentials in it."""
    if not endpoint:
        return
    url = urlsplit(endpoint)
    if url.username is not None or url.password is not None or "@" in url.netloc:
        raise ConfigError(
            f"--s3-endpoint {redact(endpoint)}: credentials in the URL are refused (they would end up in "
            "shell history and reports); remove them and set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
            "or AWS_PROFILE"
        )
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ConfigError(f"--s3-endpoint {endpoint!r}: expected http(s)://host[:port]")
    try:
        url.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ConfigError(f"--s3-endpoint {endpoint!r}: bad port ({e})") from e


# -- network -----------------------------------------------------------------------------------


def check_zookeeper(zk: ZooKeeperSource, *, timeout_s: float = ZK_TIMEOUT_S) -> ConnectString:
    """ZooKeeper answers within ``timeout_s``; refused or unresolvable addresses fail fast, named."""
    cs = parse_connect_string(zk.hosts)
    check_path("--ledgers-root", zk.ledgers_root)
    deadline = time.monotonic() + timeout_s
    problems = []
    for host, port in cs.servers:
        problem = tcp_problem(host, port, max(0.5, min(5.0, deadline - time.monotonic())))
        if problem is None:
            break
        problems.append(f"{host}:{port} {problem}")
    else:
        raise SourceError(f"zookeeper {cs.server_list()}", "unreachable: " + "; ".join(problems))
    return cs


def zookeeper_client(zk: ZooKeeperSource, *, timeout_s: float = ZK_TIMEOUT_S) -> Any:
    """A started read-only kazoo client on the cluster's chroot, bounded by ``timeout_s``."""
    from kazoo.client import KazooClient  # kazoo: only when a live ZooKeeper is checked

    options = zk.auth.kazoo_options() if zk.auth is not None else {}  # credentials by reference
    client = KazooClient(
        hosts=zk.hosts,
        timeout=timeout_s,
        read_only=True,
        connection_retry={"max_tries": 1},
        **options,  # type: ignore[arg-type]
    )
    try:
        with warnings.catch_warnings():  # a missing chroot: reported by the structure check instead
            warnings.simplefilter("ignore")
            client.start(timeout=timeout_s)
    except Exception as e:  # noqa: BLE001 - a timeout, or a server that is not ZooKeeper
        client.close()
        raise SourceError(
            f"zookeeper {zk.hosts}",
            f"no ZooKeeper session within {timeout_s:.0f} s ({type(e).__name__}); is it a ZooKeeper server?",
        ) from e
    return client


_NODE_COUNT = re.compile(r"^Node count: (\d+)$", re.MULTILINE)


def znode_count(client: Any) -> int | None:
    """The znodes the connected ZooKeeper server holds (its ``srvr`` command, which ZooKeeper
    allows by default), or None when it does not say (the command refused, a short reply)."""
    try:
        reply = client.command(b"srvr")
    except Exception:  # noqa: BLE001 - only a hint: without it nothing is tuned
        return None
    found = _NODE_COUNT.search(reply or "")
    return int(found.group(1)) if found else None


# -- Pulsar admin API --------------------------------------------------------------------------


def check_admin(
    api: AdminApi, *, allow_empty_metadata: bool = False, timeout_s: float = ADMIN_TIMEOUT_S
) -> dict[str, Any]:
    """The admin API answers (``admin_clusters``), then what it holds, counted within
    ``ADMIN_COUNT_S`` for the plausibility gates (``gates.check_admin_structure``)."""
    from ledgerlens.audit.gates import check_admin_structure  # pyspark via ledgerlens.audit: not at CLI start

    clusters = admin_clusters(api, timeout_s=timeout_s)
    client = AdminClient(api)
    deadline = time.monotonic() + ADMIN_COUNT_S

    def get(endpoint: str) -> Any:
        return admin_get(client, endpoint, deadline, missing_ok=True)

    seen = check_admin_structure(
        get, f"admin API {api.url}", concurrency=api.concurrency, allow_empty_metadata=allow_empty_metadata
    )
    seen["clusters"] = clusters
    return seen


# -- S3 ----------------------------------------------------------------------------------------


def credential_sources() -> list[str]:
    """The credential providers boto3 consults, in order (its own names)."""
    import botocore.session  # botocore: only when S3 credentials are checked

    resolver = botocore.session.get_session().get_component("credential_provider")
    return [str(getattr(p, "METHOD", type(p).__name__)) for p in resolver.providers]


def check_bucket(s3: S3Source, *, timeout_s: float = S3_TIMEOUT_S) -> bool:
    """The bucket can be listed within ``timeout_s``; errors name the bucket, the endpoint and, for
    credential problems, the sources boto3 looked at. Returns whether it holds any object."""
    import boto3  # boto3: only when a bucket is checked
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    check_s3_endpoint(s3.endpoint_url or "")
    where = f"s3 {s3.endpoint_url or 'aws'} bucket {s3.bucket}"
    session = boto3.session.Session()
    creds = session.get_credentials()
    if creds is None:
        raise SourceError(
            where,
            "no AWS credentials found; boto3 looked at: "
            + ", ".join(credential_sources())
            + " (set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or an instance role)",
        )
    config = Config(
        connect_timeout=min(5.0, timeout_s),
        read_timeout=timeout_s,
        retries={"total_max_attempts": 2, "mode": "standard"},
    )
    client = session.client("s3", endpoint_url=s3.endpoint_url, region_name=s3.region, config=config)
    try:
        listing = client.list_objects_v2(Bucket=s3.bucket, MaxKeys=1)
    except NoCredentialsError as e:
        sources = ", ".join(credential_sources())
        raise SourceError(where, f"no AWS credentials; boto3 looked at: {sources}") from e
    except ClientError as e:
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("NoSuchBucket", "404") or status == 404:
            raise SourceError(where, "the bucket does not exist (check --bucket and --s3-endpoint)") from e
        if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch") or status == 403:
            raise SourceError(
                where,
                f"access denied ({code}) with credentials from boto3's {creds.method!r} source; "
                f"boto3 looks at: {', '.join(credential_sources())}",
            ) from e
        raise SourceError(where, f"cannot list the bucket: {code or status}: {e}") from e
    except BotoCoreError as e:
        raise SourceError(where, f"cannot reach the endpoint: {e}") from e
    return bool(listing.get("KeyCount") or listing.get("Contents"))


def preflight(
    zk: ZooKeeperSource | None,
    s3: S3Source | None,
    *,
    out: str | Path | None = None,
    spark_master: str | None = None,
    allow_empty_metadata: bool = False,
    stores: Any = None,
) -> dict[str, Any]:
    """Every check that needs no Spark, cheapest first; returns what the structure checks saw.

    ``stores`` (``ledgerlens.sources.stores.Stores``; default: ``zk`` holding both) names the
    metadata stores: each live ZooKeeper and each ZooKeeper data directory is checked for the
    metadata it holds (BookKeeper's, Pulsar's or both). Raises ``ConfigError`` / ``SourceError``
    (one line, naming the setting or the server).
    """
    from ledgerlens.audit.gates import (  # pyspark, kazoo: not at CLI start
        check_snapshot_structure,
        check_structure,
        lopsided_error,
    )
    from ledgerlens.sources.admin import AdminSource
    from ledgerlens.sources.stores import Stores
    from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot
    from ledgerlens.sources.zookeeper import LiveZooKeeper

    if out is not None:
        check_writable(Path(out))
    if stores is None and zk is not None:
        stores = Stores.single(zk)
    sources = list(stores.sources()) if stores is not None else []
    live = [src.zk for src in sources if isinstance(src, LiveZooKeeper)]
    for cfg in live:  # well-formed before anything is contacted
        parse_connect_string(cfg.hosts)
        check_path("--ledgers-root", cfg.ledgers_root)
    if s3 is not None:
        check_s3_endpoint(s3.endpoint_url or "")
    if spark_master is not None:
        check_spark_master(spark_master)
    seen: dict[str, Any] = {"stores": []}
    tenants: int | None = 0
    # znodes per ZooKeeper ensemble (two stores in chroots of one count once); None: a store that
    # is no live ZooKeeper, or did not say
    sizes: dict[str, int | None] | None = {}
    # admin APIs first: one GET answered in milliseconds, or a dead URL named before any session
    for src in sorted(sources, key=lambda x: not isinstance(x, AdminSource)):
        bookkeeper = any(st in src.stages for st in BOOKKEEPER_STAGES)
        pulsar = any(st in src.stages for st in PULSAR_STAGES)
        if isinstance(src, LiveZooKeeper):
            if zk is not None and src.zk.hosts == zk.hosts:
                option = "--zookeeper"
            else:
                option = "--bookkeeper-metadata" if not pulsar else "--pulsar-metadata"
            ensemble = check_zookeeper(src.zk).server_list()
            client = zookeeper_client(src.zk)
            try:
                structure = check_structure(
                    client,
                    src.zk,
                    bookkeeper=bookkeeper,
                    pulsar=pulsar,
                    allow_empty_metadata=allow_empty_metadata,
                    option=option,
                )
                if sizes is not None and ensemble not in sizes:  # one answer per ensemble
                    sizes[ensemble] = znode_count(client)
            finally:
                client.stop()
                client.close()
        elif isinstance(src, ZooKeeperSnapshot):
            sizes = None
            structure = check_snapshot_structure(src, allow_empty_metadata=allow_empty_metadata)
        elif isinstance(src, AdminSource):
            sizes = None
            structure = check_admin(src.api, allow_empty_metadata=allow_empty_metadata)
        else:  # other source kinds check themselves when collection starts
            sizes = None
            continue
        seen["stores"].append(structure)
        if pulsar:
            n = structure.get("managed_ledger_tenants")
            tenants = None if n is None or tenants is None else tenants + n
    # every store a live ZooKeeper that told its size: an upper bound of the inventory's rows
    counts = [n for n in (sizes or {}).values() if n is not None]
    seen["znodes"] = sum(counts) if sizes and len(counts) == len(sizes) else None
    if s3 is not None:
        has_objects = check_bucket(s3)
        if has_objects and tenants == 0 and sources and not allow_empty_metadata:
            pulsar_stores = [str(x["where"]) for x in seen["stores"] if "managed_ledgers_root" in x]
            where = "; ".join(pulsar_stores) or "the metadata stores"
            raise lopsided_error(where, f"bucket {s3.bucket} holds objects")
    return seen
