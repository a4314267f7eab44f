"""Parsing of --bookkeeper-metadata / --pulsar-metadata / --zookeeper into metadata stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgerlens.errors import ConfigError
from ledgerlens.settings.config import ZooKeeperSource
from ledgerlens.sources.base import BOOKKEEPER_STAGES, PULSAR_STAGES
from ledgerlens.sources.stores import Stores, parse_store
from ledgerlens.sources.zookeeper import LiveZooKeeper

pytestmark = [pytest.mark.unit]


def _zk(src: object) -> ZooKeeperSource:
    assert isinstance(src, LiveZooKeeper)
    return src.zk


@pytest.mark.parametrize(
    "text",
    [
        "zk:zk1:2181,zk2:2181/bk/ledgers",
        "metadata-store:zk:zk1:2181,zk2:2181/bk/ledgers",
        "zk+hierarchical://zk1:2181,zk2:2181/bk/ledgers",
        "zk+null://zk1:2181,zk2:2181/bk/ledgers",
    ],
)
def test_bookkeeper_store_path_is_the_ledgers_root(text: str) -> None:
    src = parse_store(text, "bookkeeper")
    assert src.stages == BOOKKEEPER_STAGES
    assert _zk(src).hosts == "zk1:2181,zk2:2181" and _zk(src).ledgers_root == "/bk/ledgers"


def test_bookkeeper_store_default_root_and_pulsar_chroot() -> None:
    assert _zk(parse_store("zk:zk1:2181", "bookkeeper")).ledgers_root == "/ledgers"
    p = parse_store("zk:zk1:2181,zk2:2181/pulsar-b", "pulsar")
    assert p.stages == PULSAR_STAGES
    assert _zk(p).hosts == "zk1:2181,zk2:2181/pulsar-b"  # chroot: /managed-ledgers etc. under it
    assert _zk(p).managed_ledgers_root == "/managed-ledgers"
    assert p.location == "zk:zk1:2181,zk2:2181/pulsar-b"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("zk1:2181", "expected KIND:LOCATION"),
        ("etcd:host:2379", "expected KIND:LOCATION"),
        ("zk:", "expected host:port"),
        ("zk:a b:2181", "expected host:port"),
    ],
)
def test_bad_store_strings_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_store(text, "pulsar")


def test_zookeeper_alone_is_one_store_holding_both() -> None:
    s = Stores.from_options("zk1:2181/c", ledgers_root="/bk")
    assert s.pulsar == (s.bookkeeper,) and s.sources() == [s.bookkeeper]
    assert set(s.bookkeeper.stages) == set(BOOKKEEPER_STAGES + PULSAR_STAGES)
    assert _zk(s.bookkeeper).ledgers_root == "/bk"
    live = s.live_zookeeper()
    assert live is not None and live[1] == [live[0]]


def test_explicit_roles_replace_the_zookeeper_role_they_name() -> None:
    s = Stores.from_options("zk1:2181", pulsar=["zk:zk1:2181/a", "zk:zk2:2181/b"])
    assert _zk(s.bookkeeper).hosts == "zk1:2181" and s.bookkeeper.stages == BOOKKEEPER_STAGES
    assert [p.location for p in s.pulsar] == ["zk:zk1:2181/a", "zk:zk2:2181/b"]
    assert len(s.sources()) == 3
    s = Stores.from_options("zk1:2181/c", bookkeeper="zk:bk:2181/ledgers")
    assert [p.location for p in s.pulsar] == ["zk:zk1:2181/c"]
    with pytest.raises(ConfigError, match="Pulsar metadata store"):
        Stores.from_options("", bookkeeper="zk:bk:2181/ledgers")
    with pytest.raises(ConfigError, match="BookKeeper metadata store"):
        Stores.from_options("", pulsar=["zk:p:2181"])


def test_contexts_resolve_the_store_options(tmp_path: Path) -> None:
    from ledgerlens.settings import contexts

    (tmp_path / "none.toml").write_text("")  # an empty contexts file: flags and environment only
    env = {"LEDGERLENS_PULSAR_METADATA": "zk:zk1:2181,zk2:2181/a zk:zk9:2181/b", "LEDGERLENS_ZK_TIMEOUT": "7"}
    settings = contexts.resolve(
        None,
        flags={"bookkeeper_metadata": "zk:bk:2181/ledgers", "deleted_tenant": ["old", "gone"]},
        env=env,
        config=f"{tmp_path}/none.toml",
    )
    zk, _s3, audit = settings.audit_inputs()
    assert zk is None  # both roles named: no --zookeeper needed
    assert audit.deleted_tenants == ("gone", "old")
    stores = settings.stores()
    assert [p.location for p in stores.pulsar] == ["zk:zk1:2181,zk2:2181/a", "zk:zk9:2181/b"]
    assert _zk(stores.bookkeeper).timeout_s == 7.0  # the context's scan settings reach every store
    snap = contexts.resolve(
        None,
        flags={"source": "zk-snapshot", "zk_data_dir": "/backup/zk", "zookeeper": "zk1:2181/pulsar"},
        env={},
        config=f"{tmp_path}/none.toml",
    ).stores()
    assert snap.sources()[0].location == "zk-snapshot:/backup/zk#/pulsar"
