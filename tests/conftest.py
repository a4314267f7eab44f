"""Session-wide fixtures: real ZooKeeper, a real S3 API server (moto) and a local Spark session.

A fixture that cannot start its server fails the test with the reason; nothing is skipped.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from ledgerlens.errors import SandboxError
from ledgerlens.runtime.class_archive import DISABLE_ENV
from ledgerlens_sandbox.servers import S3Server, ZooKeeperServer

# the suite starts its JVMs the same way whatever the machine's cache holds (``ledgerlens warm-up``'s
# class archive); tests/*/test_class_archive*.py turn it on for themselves
os.environ[DISABLE_ENV] = "off"

_AWS_DUMMY = {
    "AWS_ACCESS_KEY_ID": "ledgerlens-test",
    "AWS_SECRET_ACCESS_KEY": "ledgerlens-test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A started ZooKeeper server on 127.0.0.1 (``.hosts``)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start(timeout=60)
    except SandboxError as e:
        pytest.fail(f"ZooKeeper did not start: {e}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A started moto S3 server (``.endpoint_url``); sets dummy AWS credentials in the environment."""
    saved = {k: os.environ.get(k) for k in _AWS_DUMMY}
    os.environ.update(_AWS_DUMMY)
    server = S3Server(tmp_path_factory.mktemp("s3"))
    try:
        server.start(timeout=60)
    except SandboxError as e:
        pytest.fail(f"S3 server did not start: {e}", pytrace=False)
    yield server
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A ``local[2]`` SparkSession with ledgerlens' settings, stopped at session end."""
    from pyspark.sql import SparkSession

    from ledgerlens.runtime.spark import configure

    # Python workers must import ledgerlens: run them with this interpreter (the venv), not PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Executors inherit the environment at start-up: the S3 scans in tests talk to moto only.
    for k, v in _AWS_DUMMY.items():
        os.environ.setdefault(k, v)
    try:
        session = configure(SparkSession.builder, master="local[2]", shuffle_partitions=4).getOrCreate()
    except Exception as e:  # noqa: BLE001 - report any start failure as a test failure
        pytest.fail(f"Spark did not start: {e}", pytrace=False)
    yield session
    session.stop()


@pytest.fixture
def zk_client(zookeeper: ZooKeeperServer) -> Iterator[object]:
    """A started KazooClient connected to the session ZooKeeper."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts, timeout=30)
    try:
        client.start(timeout=30)
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"cannot connect to ZooKeeper {zookeeper.hosts}: {e}", pytrace=False)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def fresh_root() -> str:
    """A unique path prefix (``/t-<hex>``) under which a test writes its cluster metadata."""
    return f"/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def chroot_zk(zookeeper: ZooKeeperServer, fresh_root: str) -> Iterator[object]:
    """A started KazooClient whose chroot is ``fresh_root`` (created first): a cluster of its own."""
    from kazoo.client import KazooClient

    root = KazooClient(hosts=zookeeper.hosts, timeout=30)
    root.start(timeout=30)
    root.ensure_path(fresh_root)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.hosts + fresh_root, timeout=30)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    """A freshly created, uniquely named bucket on the session S3 server."""
    import boto3

    name = f"ll-{uuid.uuid4().hex[:16]}"
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    s3.create_bucket(Bucket=name)
    return name
