"""``ledgerlens deleter --context NAME``: stores, bucket, URLs and credentials resolved like the audit's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledgerlens import cli
from ledgerlens.deletion.commands import deleter_config
from ledgerlens.errors import ConfigError
from ledgerlens.settings import contexts
from ledgerlens.settings.config import S3Source, SecretRef, ZooKeeperAuth

pytestmark = pytest.mark.unit

FILE = """\
[contexts.prod-east.pulsar]
cluster-name = "east"
admin-url = "https://pulsar-east.example.com:8443"
service-url = "pulsar+ssl://pulsar-east.example.com:6651"

[contexts.prod-east.metadata]
zookeeper = "zk1:2181,zk2:2181/pulsar"
ledgers-root = "/bk/ledgers"

[contexts.prod-east.s3]
bucket = "offload-east"
endpoint = "https://s3.eu-west-1.amazonaws.com"
region = "eu-west-1"
profile = "audit"

[contexts.prod-east.auth]
zookeeper-digest-env = "EAST_ZK_DIGEST"
admin-token-file = "/etc/ledgerlens/east.token"

[contexts.split.metadata]
bookkeeper = "zk:bk1:2181/bookkeeper/ledgers"
pulsar = ["zk:zk-east:2181/pulsar"]

[contexts.split.pulsar]
service-url = "pulsar://east:6650"

[contexts.shared.metadata]
bookkeeper = "zk:bk1:2181/ledgers"
pulsar = ["zk:zk-east:2181", "zk:zk-west:2181"]

[contexts.snapshot.metadata]
source = "zk-snapshot"
zk-data-dir = "/var/zk/data"
"""


@pytest.fixture
def contexts_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_"):
            monkeypatch.delenv(k)
    path = tmp_path / "contexts.toml"
    path.write_text(FILE)
    path.chmod(0o600)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(path))
    return path


def args(*argv: str) -> object:
    return cli.build_parser().parse_args(["deleter", "--journal", "j.jsonl", *argv])


def test_deleter_by_context_takes_every_input_from_it(contexts_file: Path) -> None:
    cfg = deleter_config(args("--context", "prod-east"))
    assert cfg.zookeeper == "zk1:2181,zk2:2181/pulsar"
    assert cfg.bookkeeper_zookeeper is None  # one store holds both
    assert cfg.roots.ledgers == "/bk/ledgers"
    assert cfg.service_url == "pulsar+ssl://pulsar-east.example.com:6651"
    assert cfg.web_url == "https://pulsar-east.example.com:8443"
    assert cfg.cluster_name == "east"
    assert cfg.s3 == S3Source(
        bucket="offload-east",
        endpoint_url="https://s3.eu-west-1.amazonaws.com",
        region="eu-west-1",
        profile="audit",
    )
    assert cfg.zookeeper_auth == ZooKeeperAuth(digest=SecretRef(env="EAST_ZK_DIGEST"))
    assert cfg.pulsar_token == SecretRef(file="/etc/ledgerlens/east.token")
    assert not cfg.execute  # a context never turns the dry run off


def test_deleter_flags_and_environment_override_the_context(
    contexts_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGERLENS_BUCKET", "from-env")
    cfg = deleter_config(args("--context", "prod-east", "--zookeeper", "other:2181", "--cluster-name", "x"))
    assert (cfg.zookeeper, cfg.cluster_name) == ("other:2181", "x")
    assert cfg.s3 is not None and cfg.s3.bucket == "from-env"
    monkeypatch.setenv(contexts.CONTEXT_ENV, "prod-east")  # $LEDGERLENS_CONTEXT names the default
    assert deleter_config(args()).service_url == "pulsar+ssl://pulsar-east.example.com:6651"


def test_deleter_separate_bookkeeper_store_from_context(contexts_file: Path) -> None:
    cfg = deleter_config(args("--context", "split"))
    assert cfg.zookeeper == "zk-east:2181/pulsar"
    assert cfg.bookkeeper_zookeeper == "bk1:2181"
    assert cfg.roots.ledgers == "/bookkeeper/ledgers"


@pytest.mark.parametrize(
    ("context", "message"),
    [("shared", "one Pulsar metadata store, 2 given"), ("snapshot", "live ZooKeeper stores only")],
)
def test_deleter_refuses_stores_it_cannot_verify_against(
    contexts_file: Path, context: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        deleter_config(args("--context", context))


def test_deleter_without_any_store_says_how_to_name_one(contexts_file: Path) -> None:
    with pytest.raises(ConfigError, match="--context NAME"):
        deleter_config(args())
