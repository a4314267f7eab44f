"""Try every store of a context, each within a bounded time (``ledgerlens contexts check NAME``).

One :class:`Probe` per store: the metadata store (a read of the ledgers root and the managed-ledger
root), the BookKeeper metadata store where separate, the bucket (a listing, and the cluster names
in a few offload objects' metadata), the admin URL (``/admin/v2/clusters``). Probes run in
parallel threads; one that has not answered within its time limit is reported as such and left
behind (a daemon thread), so the whole check ends within about the time limit. Then the safety
rules of the context: a shared bucket with no Pulsar cluster name is flagged.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ledgerlens.errors import LedgerLensError
from ledgerlens.formats.offload import parse_offload_key
from ledgerlens.settings.redact import redact
from ledgerlens.sources.admin_client import ADMIN_PROBE_PATH, admin_clusters, parse_admin_url

if TYPE_CHECKING:
    from ledgerlens.settings.contexts import Settings

__all__ = ["CheckResult", "Probe", "check_context"]

_OFFLOAD_OBJECTS_SAMPLED = 5


@dataclass
class Probe:
    """The outcome of trying one store."""

    store: str
    ok: bool
    seconds: float
    detail: str
    facts: dict[str, Any] = field(default_factory=dict)
    unknown: bool = False  # the probe could not tell (shown as "unknown", never as "ok")

    def line(self, width: int = 10) -> str:
        status = "unknown" if self.unknown else ("ok" if self.ok else "FAIL")
        return f"{self.store:<{width}} {status:<4} {self.seconds:6.2f}s  {self.detail}"


@dataclass
class CheckResult:
    """Every probe of one context; ``ok`` only when every store answered and no rule flagged."""

    probes: list[Probe]

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.probes)

    def lines(self) -> list[str]:
        width = max((len(p.store) for p in self.probes), default=0)
        return [redact(p.line(width)) for p in self.probes]


class _Failed(Exception):
    """A probe's one-line failure."""


def _error_text(e: BaseException) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if isinstance(e, _Failed | LedgerLensError) else f"{type(e).__name__}: {text}"


def _timed(store: str, fn: Callable[[float], tuple[str, dict[str, Any]]], timeout_s: float) -> Probe:
    """Run ``fn(deadline)`` in a daemon thread; a failure or no answer in time is a failed probe."""
    box: dict[str, Any] = {}
    t0 = time.monotonic()
    deadline = t0 + timeout_s

    def run() -> None:
        try:
            box["result"] = fn(deadline)
        except BaseException as e:  # noqa: BLE001 - every failure is one line of the check
            box["error"] = e
        box["seconds"] = time.monotonic() - t0

    thread = threading.Thread(target=run, name=f"ledgerlens-check-{store}", daemon=True)
    thread.start()
    thread.join(timeout_s + 1.0)
    if thread.is_alive():
        return Probe(store, False, time.monotonic() - t0, f"no answer within {timeout_s:g}s")
    if "error" in box:
        return Probe(store, False, box["seconds"], _error_text(box["error"]))
    detail, facts = box["result"]
    return Probe(store, True, box["seconds"], detail, facts)


def _zookeeper(
    hosts: str, roots: list[tuple[str, str]], auth: Any
) -> Callable[[float], tuple[str, dict[str, Any]]]:
    def probe(deadline: float) -> tuple[str, dict[str, Any]]:
        from kazoo.exceptions import NoAuthError, NoNodeError  # kazoo: only when a ZooKeeper is probed

        from ledgerlens.sources.zk_client import connect

        client = connect(hosts, timeout_s=max(1.0, deadline - time.monotonic()), auth=auth)
        try:
            parts = []
            for label, path in roots:
                try:
                    children = client.get_children_async(path).get(
                        timeout=max(0.5, deadline - time.monotonic())
                    )
                except NoNodeError:
                    raise _Failed(f"{hosts}: {label} {path} does not exist") from None
                except NoAuthError:
                    raise _Failed(
                        f"{hosts}: {label} {path}: not authorized (check the auth settings)"
                    ) from None
                parts.append(f"{path} ({len(children)} children)")
            return f"{hosts}: read " + ", ".join(parts), {}
        finally:
            client.stop()
            client.close()

    return probe


def _bucket(settings: Settings, timeout_s: float) -> Callable[[float], tuple[str, dict[str, Any]]]:
    def probe(deadline: float) -> tuple[str, dict[str, Any]]:
        import boto3  # boto3: only when a bucket is probed
        from botocore.config import Config

        source = settings.s3_source()
        assert source is not None
        where = f"s3 {source.endpoint_url or 'aws'} bucket {source.bucket}"
        session = boto3.Session(profile_name=source.profile) if source.profile else boto3.Session()
        half = max(1.0, timeout_s / 2)
        client = session.client(
            "s3",
            endpoint_url=source.endpoint_url,
            region_name=source.region,
            config=Config(connect_timeout=half, read_timeout=half, retries={"max_attempts": 1}),
        )
        try:
            page = client.list_objects_v2(Bucket=source.bucket, MaxKeys=200)
        except Exception as e:  # ClientError, EndpointConnectionError, ...
            raise _Failed(f"{where}: cannot list: {_error_text(e)}") from None
        keys = [o["Key"] for o in page.get("Contents", ())]
        clusters: set[str] = set()
        sampled = 0
        for key in keys:
            if sampled >= _OFFLOAD_OBJECTS_SAMPLED or time.monotonic() > deadline - half:
                break
            if parse_offload_key(key) is None:
                continue
            sampled += 1
            try:
                meta = client.head_object(Bucket=source.bucket, Key=key).get("Metadata", {})
            except Exception:  # noqa: BLE001 - a vanished object: the listing answered anyway
                continue
            name = {k.lower(): v for k, v in meta.items()}.get("pulsarclustername")
            if name:
                clusters.add(name)
        more = "+" if page.get("IsTruncated") else ""
        detail = f"{where}: listed {len(keys)}{more} keys"
        if clusters:
            detail += f", offload objects of cluster(s) {', '.join(sorted(clusters))}"
        return detail, {"clusters": sorted(clusters)}

    return probe


def _admin(settings: Settings, timeout_s: float) -> Callable[[float], tuple[str, dict[str, Any]]]:
    """``GET /admin/v2/clusters`` as the audit's preflight does it (``sources.admin_client.admin_clusters``:
    the admin source's token reference and TLS settings, one line per failure)."""

    def probe(deadline: float) -> tuple[str, dict[str, Any]]:
        api = settings.admin_api()
        api = replace(api, url=parse_admin_url(api.url))
        url = api.url + ADMIN_PROBE_PATH
        clusters = admin_clusters(api, timeout_s=max(0.5, deadline - time.monotonic()))
        name = settings["pulsar.cluster-name"]
        if name and name not in clusters:
            raise _Failed(f"{url}: cluster {name!r} is not among this broker's clusters {clusters}")
        return f"{url}: clusters {', '.join(clusters) or '(none)'}", {"clusters": clusters}

    return probe


def _shared_bucket_rule(settings: Settings, bucket_probe: Probe | None) -> Probe | None:
    """Flag a context without a Pulsar cluster name whose bucket other clusters use too."""
    bucket = settings["s3.bucket"]
    if not bucket:
        return None
    t0 = time.monotonic()
    reasons: list[str] = []
    if settings["s3.shared"]:
        reasons.append(f"s3.shared is true ({settings.origin('s3.shared')})")
    contexts_file = settings.file
    if contexts_file is not None:
        others = [
            n
            for n, values in contexts_file.contexts.items()
            if n != settings.context
            and values.get("s3.bucket", (None,))[0] == bucket
            and (values.get("s3.endpoint", ("",))[0] or "") == (settings["s3.endpoint"] or "")
        ]
        if others:
            reasons.append(f"contexts {', '.join(others)} use it too")
    seen = (bucket_probe.facts.get("clusters") or []) if bucket_probe else []
    name = settings["pulsar.cluster-name"]
    if len(seen) > 1 or (name and seen and any(c != name for c in seen)):
        reasons.append(f"it holds offload objects of clusters {', '.join(seen)}")
    if not reasons and (bucket_probe is None or not bucket_probe.ok):
        return Probe(
            "safety",
            False,
            time.monotonic() - t0,
            f"bucket {bucket} could not be listed: whether other clusters share it is not known",
            unknown=True,
        )
    if not reasons:
        return Probe("safety", True, time.monotonic() - t0, f"bucket {bucket} is not known to be shared")
    if not name:
        return Probe(
            "safety",
            False,
            time.monotonic() - t0,
            f"bucket {bucket} is shared ({'; '.join(reasons)}) and the context names no "
            "pulsar.cluster-name: objects of other clusters cannot be told apart from orphans",
        )
    return Probe(
        "safety",
        True,
        time.monotonic() - t0,
        f"bucket {bucket} is shared; objects attributed by cluster {name}",
    )


def _metadata_jobs(
    settings: Settings, early: list[Probe]
) -> list[tuple[str, Callable[[float], tuple[str, dict[str, Any]]]]]:
    """One probe per live metadata store (``settings.stores()``): BookKeeper's reads its ledgers
    root, each Pulsar store its managed-ledger root; one store holding both reads both."""
    from ledgerlens.sources.zk_snapshot import ZooKeeperSnapshot  # pyspark, kazoo: only when probed
    from ledgerlens.sources.zookeeper import LiveZooKeeper

    try:
        stores = settings.stores()
    except LedgerLensError as e:
        early.append(Probe("metadata", False, 0.0, _error_text(e)))
        return []
    roots: dict[str, list[tuple[str, str]]] = {}
    auth: dict[str, Any] = {}
    for role, src in [("bookkeeper", stores.bookkeeper), *[("pulsar", p) for p in stores.pulsar]]:
        if isinstance(src, LiveZooKeeper):
            label, path = (
                ("ledgers root", src.zk.ledgers_root)
                if role == "bookkeeper"
                else ("managed-ledger root", src.zk.managed_ledgers_root)
            )
            if (label, path) not in roots.setdefault(src.zk.hosts, []):
                roots[src.zk.hosts].append((label, path))
            auth[src.zk.hosts] = src.zk.auth
        elif isinstance(src, ZooKeeperSnapshot):
            readable = os.access(src.data_dir, os.R_OK | os.X_OK)
            early.append(
                Probe(
                    "zk-snapshot",
                    readable,
                    0.0,
                    f"{src.data_dir}: " + ("readable" if readable else "NOT READABLE"),
                )
            )
    jobs = []
    for i, (hosts, paths) in enumerate(roots.items()):
        kinds = {label for label, _ in paths}
        name = (
            "zookeeper"
            if len(kinds) == 2 or len(roots) == 1
            else ("bookkeeper" if "ledgers root" in kinds else "pulsar")
        )
        if name == "pulsar" and i > 1:
            name = f"pulsar-{i}"
        jobs.append((name, _zookeeper(hosts, paths, auth[hosts])))
    return jobs


def check_context(settings: Settings, *, timeout_s: float = 10.0) -> CheckResult:
    """Try every store ``settings`` names, in parallel, each within ``timeout_s``."""
    jobs: list[tuple[str, Callable[[float], tuple[str, dict[str, Any]]]]] = []
    early: list[Probe] = []
    if settings["metadata.zookeeper"] or settings["metadata.bookkeeper"] or settings["metadata.pulsar"]:
        jobs += _metadata_jobs(settings, early)
    if settings["s3.bucket"]:
        jobs.append(("bucket", _bucket(settings, timeout_s)))
    if settings["pulsar.admin-url"]:
        jobs.append(("admin", _admin(settings, timeout_s)))
    results: dict[str, Probe] = {}
    threads = [
        threading.Thread(target=lambda s=s, f=f: results.__setitem__(s, _timed(s, f, timeout_s)), daemon=True)
        for s, f in jobs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s + 2.0)
    probes = [
        results.get(s) or Probe(s, False, timeout_s, f"no answer within {timeout_s:g}s") for s, _ in jobs
    ]
    if not probes:
        probes.append(
            Probe("stores", False, 0.0, "the context names no store (metadata.zookeeper, s3.bucket)")
        )
    rule = _shared_bucket_rule(settings, results.get("bucket"))
    if rule is not None:
        probes.append(rule)
    return CheckResult(probes)
