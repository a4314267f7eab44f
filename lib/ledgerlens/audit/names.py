"""Column -> column helpers over Pulsar names: managed ledgers, topics, prefixes.

Pure Spark SQL expressions (no Python UDFs), so the plan stays in the JVM.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

DOMAINS = ("persistent", "non-persistent")

# The tag an owner of unknown name gets: hidden as soon as any blind spot of its kind exists.
ANY = "\u0000any"


def ml_namespace(ml: Column) -> Column:
    """``t/ns/persistent/x`` -> ``t/ns``; v1 ``t/c/ns/persistent/x`` -> ``t/c/ns``; else null."""
    p = F.split(ml, "/")
    n = F.size(p)
    return F.when((n >= 4) & p.getItem(2).isin(*DOMAINS), F.concat_ws("/", p.getItem(0), p.getItem(1))).when(
        (n >= 5) & p.getItem(3).isin(*DOMAINS), F.concat_ws("/", p.getItem(0), p.getItem(1), p.getItem(2))
    )


def ml_tenant(ml: Column) -> Column:
    """The tenant of a managed-ledger name, when the name has a recognisable shape; else null."""
    return F.when(ml_namespace(ml).isNotNull(), F.split(ml, "/").getItem(0))


def topic_to_ml(topic: Column) -> Column:
    """``persistent://t/ns/x`` -> ``t/ns/persistent/<url-encoded x>`` (v1: 4 parts); else null.

    Splits like Pulsar's ``TopicName``: at most 4 parts, 3 is v2, 4 is v1.
    """
    m = F.regexp_extract(topic, r"^(persistent|non-persistent)://(.+)$", 1)
    rest = F.regexp_extract(topic, r"^(?:persistent|non-persistent)://(.+)$", 1)
    p = F.split(rest, "/", 4)
    n = F.size(p)
    return F.when(
        (m != "") & (n == 3), F.concat_ws("/", p.getItem(0), p.getItem(1), m, F.url_encode(p.getItem(2)))
    ).when(
        (m != "") & (n == 4),
        F.concat_ws("/", p.getItem(0), p.getItem(1), p.getItem(2), m, F.url_encode(p.getItem(3))),
    )


def name_prefixes(name: Column, tag: str) -> Column:
    """Every '/'-prefix of ``name`` (``""``, ``a``, ``a/b``, ...), each prefixed with ``tag + ":"``.

    A null name gives ``[tag + ":" + ANY]``: it matches when any blind spot of that tag exists.
    """
    parts = F.split(F.regexp_replace(name, "/+$", ""), "/")
    prefixes = F.transform(
        F.sequence(F.lit(0), F.size(parts)),
        lambda i: F.concat(F.lit(f"{tag}:"), F.array_join(F.slice(parts, 1, i), "/")),
    )
    return F.when(name.isNull(), F.array(F.lit(f"{tag}:{ANY}"))).otherwise(prefixes)
