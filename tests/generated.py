"""A generated cluster (``ledgerlens_sandbox.cluster.generate``) in its own chroot and bucket.

Tests that audit a generated cluster share this set-up instead of repeating it.
"""

from __future__ import annotations

import uuid
from typing import Any


def generated_cluster(
    zookeeper: Any, s3_server: Any, prefix: str, *, now_ms: int, scenario: str = "planted"
) -> dict[str, Any]:
    """Write a ``scenario`` cluster under a fresh ``/<prefix>-<hex>`` chroot with a fresh bucket.

    Returns ``hosts`` (connect string with the chroot), ``bucket``, ``endpoint`` and ``truth``
    (the generator's ``GroundTruth``).
    """
    import boto3
    from kazoo.client import KazooClient

    from ledgerlens_sandbox.cluster import generate

    chroot = f"/{prefix}-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    bucket = f"{prefix}-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1").create_bucket(
        Bucket=bucket
    )
    hosts = zookeeper.hosts + chroot
    truth = generate(
        hosts, root="", s3_endpoint=s3_server.endpoint_url, bucket=bucket, scenario=scenario, now_ms=now_ms
    )
    return {"hosts": hosts, "bucket": bucket, "endpoint": s3_server.endpoint_url, "truth": truth}
