"""Writing a built cluster: znodes to a live ZooKeeper (pipelined transactions), objects to S3, ACLs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def _connect(zk_hosts: str) -> Any:
    from kazoo.client import KazooClient  # kazoo: only where ZooKeeper is written

    client = KazooClient(hosts=zk_hosts, timeout=30)
    client.start(timeout=30)
    return client


def write_znodes(
    client: Any,
    nodes: Mapping[str, tuple[bytes, list[Any] | None]],
    *,
    batch: int = 100,
    in_flight: int = 8,
    batch_bytes: int = 512 * 1024,
) -> int:
    """Create ``nodes`` and every missing ancestor with pipelined transactions; returns znodes created.

    Ancestors are created parents-first; one session's requests are applied in order, so later
    transactions may create children of nodes in earlier ones.
    """
    all_nodes: dict[str, tuple[bytes, list[Any] | None]] = dict(nodes)
    for path in nodes:
        parent = path.rsplit("/", 1)[0]
        while parent and parent not in all_nodes:
            all_nodes[parent] = (b"", None)
            parent = parent.rsplit("/", 1)[0]
    # Top levels may already exist (another scenario under the same root, or the real root).
    todo = sorted(all_nodes, key=lambda p: (p.count("/"), p))
    existing = set()
    for p in todo:
        if p.count("/") > 3:
            break
        if client.exists(p):
            if all_nodes[p][0]:
                raise ValueError(f"znode {p} exists already")
            existing.add(p)
    todo = [p for p in todo if p not in existing]
    pending: list[tuple[Any, list[str]]] = []

    def settle(item: tuple[Any, list[str]]) -> None:
        result, paths = item
        for path, res in zip(paths, result.get(timeout=120), strict=True):
            if isinstance(res, Exception):
                raise RuntimeError(f"creating {path} failed: {res!r}")

    i = 0
    while i < len(todo):
        txn = client.transaction()
        paths: list[str] = []
        size = 0
        while i < len(todo) and len(paths) < batch and size < batch_bytes:
            p = todo[i]
            data, acl = all_nodes[p]
            txn.create(p, data, acl=acl)
            paths.append(p)
            size += len(data) + len(p)
            i += 1
        pending.append((txn.commit_async(), paths))
        if len(pending) >= in_flight:
            settle(pending.pop(0))
    for item in pending:
        settle(item)
    return len(todo)


def _write_objects(endpoint: str, bucket: str, objects: Sequence[tuple[str, bytes, dict[str, str]]]) -> None:
    import boto3  # boto3: only where objects are written

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    for key, body, meta in objects:
        s3.put_object(Bucket=bucket, Key=key, Body=body, Metadata=meta)


def write_objects_parallel(
    endpoint: str, bucket: str, objects: Sequence[tuple[str, bytes, dict[str, str]]], threads: int = 16
) -> None:
    """PUT ``objects`` with ``threads`` concurrent requests (an S3 server with a slow write path)."""
    import boto3  # boto3: only where objects are written
    from botocore.config import Config  # botocore: with boto3, only where objects are written

    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", config=Config(max_pool_connections=threads)
    )

    def put(obj: tuple[str, bytes, dict[str, str]]) -> None:
        s3.put_object(Bucket=bucket, Key=obj[0], Body=obj[1], Metadata=obj[2])

    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(put, objects):
            pass


def restrict(client: Any, root: str, acl: list[Any]) -> int:
    """Set ``acl`` on ``root`` and every node below it: a cluster only some credentials may read.

    ``client`` (a started kazoo client) must hold the credentials the ACL names (``add_auth`` or
    SASL) to walk on below nodes it has restricted. Returns the number of nodes.
    """
    frontier, n = [root], 0
    while frontier:
        path = frontier.pop()
        client.set_acls(path, acl)
        n += 1
        frontier.extend(f"{path.rstrip('/')}/{c}" for c in client.get_children(path))
    return n
