from __future__ import annotations

import pytest

from ledgerlens.errors import DecodeError
from ledgerlens.formats.names import (
    decode_component,
    encode_component,
    managed_ledger_to_topic,
    parse_managed_ledger,
    schema_id_for_topic,
    topic_to_managed_ledger,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [
        ("my-topic_1.x*", "my-topic_1.x*"),
        ("a b", "a+b"),
        ("100%", "100%25"),
        ("a~b", "a%7Eb"),
        ("a+b", "a%2Bb"),
        ("a/b:c", "a%2Fb%3Ac"),
        ("é", "%C3%A9"),
        ("主题", "%E4%B8%BB%E9%A2%98"),
        ("😀", "%F0%9F%98%80"),
        ("", ""),
    ],
)
def test_encode_decode(raw, encoded):
    assert encode_component(raw) == encoded
    assert decode_component(encoded) == raw


def test_decode_lowercase_hex_and_bad_escapes():
    assert decode_component("%c3%a9") == "é"
    for bad in ["%", "%4", "%zz", "%C3"]:
        with pytest.raises(DecodeError):
            decode_component(bad)


def test_v2_partitioned():
    n = parse_managed_ledger("public/default/persistent/orders-partition-3")
    assert n.name == "public/default/persistent/orders-partition-3"
    assert (n.tenant, n.namespace, n.cluster, n.domain) == ("public", "public/default", None, "persistent")
    assert n.local_name == n.encoded_local_name == "orders-partition-3"
    assert n.partition == 3
    assert n.topic == "persistent://public/default/orders-partition-3"
    assert n.base_topic == "persistent://public/default/orders"
    assert n.schema_id == "public/default/orders"


def test_v2_encoded_name():
    n = parse_managed_ledger("t/ns/persistent/my+topic+100%25+%7E+%C3%A9")
    assert n.local_name == "my topic 100% ~ é"
    assert n.encoded_local_name == "my+topic+100%25+%7E+%C3%A9"
    assert n.partition is None
    assert n.topic == n.base_topic == "persistent://t/ns/my topic 100% ~ é"


def test_v1_name():
    n = parse_managed_ledger("prop/us-west/ns1/persistent/topic-partition-10")
    assert n.cluster == "us-west"
    assert n.namespace == "prop/us-west/ns1"
    assert n.partition == 10
    assert n.topic == "persistent://prop/us-west/ns1/topic-partition-10"
    assert n.base_topic == "persistent://prop/us-west/ns1/topic"
    assert managed_ledger_to_topic(n.name) == n.topic
    assert topic_to_managed_ledger(n.topic) == n.name


@pytest.mark.parametrize(
    "local", ["t-partition-01", "t-partition--1", "t-partition-x", "t-partition-99999999999"]
)
def test_not_partitions(local):
    n = parse_managed_ledger(f"a/b/persistent/{local}")
    assert n.partition is None
    assert n.base_topic == n.topic


def test_last_partition_suffix_wins():
    n = parse_managed_ledger("a/b/persistent/x-partition-1-partition-2")
    assert n.partition == 2
    assert n.base_topic == "persistent://a/b/x-partition-1"


@pytest.mark.parametrize(
    "ml",
    [
        "",
        "a/b/c",
        "a/b/non-persistent/t",
        "a/b/persistent/",
        "a/b/c/d/e/f",
        "/b/persistent/t",
        "a/b/persistent/%zz",
        "a/c/b/non-persistent/t",
    ],
)
def test_bad_ml_names(ml):
    with pytest.raises(DecodeError) as info:
        parse_managed_ledger(ml)
    assert info.value.where == ml


@pytest.mark.parametrize(
    ("topic", "ml"),
    [
        ("persistent://public/default/orders", "public/default/persistent/orders"),
        ("persistent://t/ns/a b~c%d", "t/ns/persistent/a+b%7Ec%25d"),
        ("persistent://t/ns/主题-partition-0", "t/ns/persistent/%E4%B8%BB%E9%A2%98-partition-0"),
        ("persistent://t/c/ns/x/y", "t/c/ns/persistent/x%2Fy"),
        ("orders", "public/default/persistent/orders"),
        ("t/ns/orders", "t/ns/persistent/orders"),
    ],
)
def test_topic_to_managed_ledger(topic, ml):
    assert topic_to_managed_ledger(topic) == ml
    full = topic if "://" in topic else parse_managed_ledger(ml).topic
    assert managed_ledger_to_topic(ml) == full


def test_topic_errors():
    for bad in ["non-persistent://t/ns/x", "persistent://t/ns", "persistent://t/ns/", "a/b"]:
        with pytest.raises(DecodeError):
            topic_to_managed_ledger(bad)


def test_schema_id_for_topic():
    assert schema_id_for_topic("persistent://t/ns/orders-partition-7") == "t/ns/orders"
    assert schema_id_for_topic("persistent://t/ns/my topic") == "t/ns/my+topic"
    assert schema_id_for_topic("persistent://t/cluster/ns/x-partition-1") == "t/ns/x"
    assert schema_id_for_topic("non-persistent://t/ns/x") == "t/ns/x"
    assert schema_id_for_topic("orders") == "public/default/orders"
