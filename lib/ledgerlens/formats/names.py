"""Topic, managed-ledger, cursor and schema names (FORMATS.md sections 1 and 5).

Pulsar persists a topic ``persistent://tenant/ns/local`` as the managed ledger
``tenant/ns/persistent/<Codec.encode(local)>`` (legacy v1: ``tenant/cluster/ns/persistent/<enc>``),
where ``Codec.encode`` is ``java.net.URLEncoder.encode(s, UTF-8)``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ledgerlens.errors import DecodeError

PERSISTENT = "persistent"
PARTITION_SUFFIX = "-partition-"
PUBLIC_TENANT = "public"
DEFAULT_NAMESPACE = "default"

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.*_-")
_PARTITION_RE = re.compile(r"^(?P<base>.*)-partition-(?P<index>0|[1-9][0-9]*)$", re.S)
_INT_MAX = 2147483647


def encode_component(s: str) -> str:
    """Encode like ``java.net.URLEncoder.encode(s, UTF-8)``.

    ``[A-Za-z0-9.*_-]`` stay, space becomes ``+``, every other UTF-8 byte becomes ``%XX``
    (uppercase). Unpaired surrogates become ``?`` as in Java.
    """
    out = []
    for byte in s.encode("utf-8", errors="replace"):
        if byte in _UNRESERVED:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


def decode_component(s: str) -> str:
    """Decode like ``java.net.URLDecoder.decode(s, UTF-8)``: ``+`` is a space, ``%XX`` a byte.

    Raises
    ------
    DecodeError
        A malformed ``%`` escape, or bytes that are not UTF-8.
    """
    if s.isascii() and "%" not in s and "+" not in s:
        return s  # nothing escaped: the common case, decoded as the loop below would
    buf = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "+":
            buf.append(0x20)
            i += 1
        elif c == "%":
            hexpart = s[i + 1 : i + 3]
            if len(hexpart) != 2 or not all(h in "0123456789abcdefABCDEF" for h in hexpart):
                raise DecodeError(s, f"malformed %-escape {s[i : i + 3]!r} at position {i}")
            buf.append(int(hexpart, 16))
            i += 3
        else:
            buf.extend(c.encode("utf-8", errors="surrogatepass"))
            i += 1
    try:
        return buf.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(s, f"%-escapes do not decode as UTF-8: {exc}") from exc


def _partition(local_name: str) -> tuple[int | None, str]:
    """Return (partition index or None, base local name) as Pulsar's ``TopicName`` does."""
    m = _PARTITION_RE.match(local_name)
    if m is None:
        return None, local_name
    index = int(m.group("index"))
    if index > _INT_MAX:
        return None, local_name
    return index, m.group("base")


@dataclass(frozen=True)
class ManagedLedgerName:
    """A managed-ledger name and the topic it stores."""

    name: str
    tenant: str
    namespace: str  # "tenant/ns", or "tenant/cluster/ns" for v1 names
    cluster: str | None
    domain: str
    local_name: str
    encoded_local_name: str
    partition: int | None
    topic: str
    base_topic: str

    @property
    def namespace_portion(self) -> str:
        """The namespace without tenant and cluster."""
        return self.namespace.rsplit("/", 1)[-1]

    @property
    def schema_id(self) -> str:
        """The schema id of the topic (``/schemas/<schema_id>``)."""
        _, base = _partition(self.local_name)
        return f"{self.tenant}/{self.namespace_portion}/{encode_component(base)}"


def _make(
    name: str, tenant: str, cluster: str | None, ns: str, domain: str, encoded: str
) -> ManagedLedgerName:
    try:
        local = decode_component(encoded)
    except DecodeError as exc:
        raise DecodeError(name, f"topic part {encoded!r} of the managed-ledger name: {exc.problem}") from exc
    if not (tenant and ns and local) or (cluster is not None and not cluster):
        raise DecodeError(name, "not a managed-ledger name: empty tenant, cluster, namespace or topic")
    namespace = f"{tenant}/{cluster}/{ns}" if cluster is not None else f"{tenant}/{ns}"
    partition, base = _partition(local)
    prefix = f"{domain}://{namespace}/"
    return ManagedLedgerName(
        name=name,
        tenant=tenant,
        namespace=namespace,
        cluster=cluster,
        domain=domain,
        local_name=local,
        encoded_local_name=encoded,
        partition=partition,
        topic=prefix + local,
        base_topic=prefix + base,
    )


@functools.lru_cache(maxsize=8192)  # a scan parses each name for its ledgers, then its cursors
def parse_managed_ledger(ml: str) -> ManagedLedgerName:
    """Parse a managed-ledger name.

    Parameters
    ----------
    ml : str
        ``tenant/ns/persistent/<enc>`` (v2) or ``tenant/cluster/ns/persistent/<enc>`` (v1), as
        found under ``/managed-ledgers``.

    Raises
    ------
    DecodeError
        Any other shape, an empty part, or a malformed encoded local name.
    """
    parts = ml.split("/")
    if len(parts) == 4 and parts[2] == PERSISTENT:
        tenant, ns, domain, encoded = parts
        return _make(ml, tenant, None, ns, domain, encoded)
    if len(parts) == 5 and parts[3] == PERSISTENT:
        tenant, cluster, ns, domain, encoded = parts
        return _make(ml, tenant, cluster, ns, domain, encoded)
    raise DecodeError(
        ml,
        "not a managed-ledger name: expected tenant/ns/persistent/<topic> or "
        "tenant/cluster/ns/persistent/<topic>",
    )


def split_topic(topic: str) -> tuple[str, str, str | None, str, str]:
    """Split a topic name as Pulsar's ``TopicName`` does: (domain, tenant, cluster, ns, local)."""
    if "://" not in topic:
        short = [p for p in topic.split("/") if p]
        if len(short) == 3:
            topic = f"{PERSISTENT}://{topic}"
        elif len(short) == 1:
            topic = f"{PERSISTENT}://{PUBLIC_TENANT}/{DEFAULT_NAMESPACE}/{short[0]}"
        else:
            raise DecodeError(
                topic, "invalid short topic name: expected <tenant>/<namespace>/<topic> or <topic>"
            )
    domain, rest = topic.split("://", 1)
    parts = rest.split("/", 3)
    if len(parts) == 3:
        tenant, ns, local = parts
        cluster = None
    elif len(parts) == 4:
        tenant, cluster, ns, local = parts
    else:
        raise DecodeError(topic, "invalid topic name: expected domain://tenant/namespace/topic")
    if not local:
        raise DecodeError(topic, "invalid topic name: empty local name")
    return domain, tenant, cluster, ns, local


def topic_to_managed_ledger(topic: str) -> str:
    """Return the managed-ledger name of a persistent topic.

    Raises
    ------
    DecodeError
        A malformed topic name or a domain other than ``persistent``.
    """
    domain, tenant, cluster, ns, local = split_topic(topic)
    if domain != PERSISTENT:
        raise DecodeError(topic, f"only persistent topics have a managed ledger (domain {domain!r})")
    middle = f"{tenant}/{cluster}/{ns}" if cluster is not None else f"{tenant}/{ns}"
    return f"{middle}/{PERSISTENT}/{encode_component(local)}"


def managed_ledger_to_topic(ml: str) -> str:
    """Return the topic name stored by a managed ledger (decoded local name)."""
    return parse_managed_ledger(ml).topic


def schema_id_for_topic(topic: str) -> str:
    """Return the schema id of a topic: ``tenant/ns/<encoded base local name>``.

    As Pulsar's ``TopicName.getSchemaName()``: no domain, no cluster, no partition suffix.
    """
    _, tenant, _, ns, local = split_topic(topic)
    _, base = _partition(local)
    return f"{tenant}/{ns}/{encode_component(base)}"
