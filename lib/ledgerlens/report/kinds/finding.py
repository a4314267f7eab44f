"""One findings row as explainers read it (``Finding``), and the helpers every explainer shares.

``Finding`` names what a row holds (ledger, managed ledger, topic, object, evidence fields) with
nulls and NaNs as None; ``AuditedWhere`` carries the audited addresses that commands fill in (never
credentials). The command helpers (``ledger_meta``, ``info_internal``, ``lines``) are the ones
several subjects use.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from ledgerlens.formats.names import parse_managed_ledger
from ledgerlens.report.text import human_bytes, human_duration, is_missing


@dataclass(frozen=True)
class AuditedWhere:
    """Addresses of what was audited, to fill into commands (never credentials)."""

    zookeeper: str = ""
    bucket: str = ""
    s3_endpoint: str = ""
    kafka: str = ""  # Kafka bootstrap servers (kafka-audit)

    @classmethod
    def of(cls, context: Mapping[str, Any] | AuditedWhere | None) -> AuditedWhere:
        if isinstance(context, AuditedWhere):
            return context
        c = dict(context or {})
        return cls(
            zookeeper=str(c.get("zookeeper") or ""),
            bucket=str(c.get("bucket") or ""),
            s3_endpoint=str(c.get("s3_endpoint") or ""),
            kafka=str(c.get("bootstrap_servers") or c.get("kafka") or ""),
        )


def _value(row: Mapping[str, Any], name: str) -> Any:
    v = row.get(name)
    return None if is_missing(v) else v


def q(value: object) -> str:
    """Shell-quote a name for a command line (topic names may hold spaces and quotes)."""
    return shlex.quote(str(value))


T = TypeVar("T")


class _Column(Generic[T]):
    """A ``Finding`` attribute read from the row's column of the same name (None when null/NaN), else,
    with ``evidence``, from the evidence field of that name; ``convert`` turns a value into ``T``."""

    def __init__(self, convert: Callable[[Any], T], *, evidence: bool = False) -> None:
        self.convert, self.evidence, self.name = convert, evidence, ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Column[T]: ...
    @overload
    def __get__(self, obj: Finding, owner: type | None = None) -> T | None: ...
    def __get__(self, obj: Finding | None, owner: type | None = None) -> _Column[T] | T | None:
        if obj is None:
            return self
        v = obj.get(self.name)
        if self.evidence:
            v = v or obj.ev(self.name)
        return None if v is None else self.convert(v)


@dataclass(frozen=True)
class Finding:
    """A read-only view of one findings row, with the names explainers need."""

    row: Mapping[str, Any]
    where: AuditedWhere = field(default_factory=AuditedWhere)

    def get(self, name: str) -> Any:
        """A column's value; None when null/NaN."""
        return _value(self.row, name)

    @property
    def kind(self) -> str:
        return str(self.get("kind") or "")

    @property
    def severity(self) -> str:
        return str(self.get("severity") or "")

    ledger_id = _Column(int)
    managed_ledger = _Column(str, evidence=True)
    cursor = _Column(str, evidence=True)
    path = _Column(str)
    object_key = _Column(str)
    namespace = _Column(str)
    bytes = _Column(int)

    @property
    def size(self) -> str:
        """Human size, or ``'size unknown'``."""
        return human_bytes(self.bytes) if self.bytes is not None else "size unknown"

    @property
    def age(self) -> str:
        """Human age (``'3.0 d'``), or ``''``."""
        return human_duration(self.get("age_seconds"))

    def aged(self, words: str) -> str:
        """``words`` with the age for ``{}`` (``', created {} ago'`` -> ``', created 3.0 d ago'``), ``''``
        without an age."""
        return words.format(self.age) if self.age else ""

    @property
    def key(self) -> str:
        """The object key, or ``KEY`` in commands when unknown."""
        return self.object_key or "KEY"

    @property
    def tenant(self) -> str | None:
        """The tenant named by the evidence, else by the row."""
        v = self.ev("tenant") or self.get("tenant")
        return None if v is None else str(v)

    @property
    def evidence(self) -> dict[str, Any]:
        """The evidence JSON as a dict (``{}`` when absent or not JSON)."""
        return parse_evidence(self.get("evidence"))

    def ev(self, name: str, default: Any = None) -> Any:
        """One evidence field (None/NaN -> ``default``)."""
        v = self.evidence.get(name)
        return default if v is None or is_missing(v) else v

    def ev_duration(self, name: str, label: str = "limit", per_second: int = 1) -> str:
        """`` (<label> 2.0 h)`` from the evidence's duration ``name`` (``per_second``: its units in a second),
        or ``''`` without one."""
        v = self.ev(name)
        return f" ({label} {human_duration(v / per_second)})" if v else ""

    @property
    def topic(self) -> str | None:
        """``persistent://tenant/ns/topic`` of the managed ledger, when it parses."""
        ml = self.managed_ledger
        if not ml:
            return None
        try:
            return parse_managed_ledger(ml).topic
        except Exception:  # noqa: BLE001 - a name that does not parse is shown as it is
            return None

    @property
    def owner(self) -> str:
        """The topic, else the managed-ledger name, else ``'an unknown owner'``."""
        return self.topic or self.managed_ledger or "an unknown owner"

    @property
    def bucket(self) -> str:
        return str(self.ev("bucket") or self.where.bucket or "BUCKET")

    @property
    def zk(self) -> str:
        """The audited ZooKeeper connect string (``ZK`` when unknown)."""
        return self.where.zookeeper or "ZK"

    def s3api(self, op: str, key: str) -> str:
        """``aws s3api <op> --bucket B --key K`` (with ``--endpoint-url`` for a non-AWS endpoint)."""
        endpoint = f" --endpoint-url {q(self.where.s3_endpoint)}" if self.where.s3_endpoint else ""
        return f"aws s3api {op}{endpoint} --bucket {q(self.bucket)} --key {q(key)}"


def parse_evidence(value: Any) -> dict[str, Any]:
    """Evidence (a JSON object string, a dict or null) as a dict."""
    if value is None or is_missing(value):
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        parsed = json.loads(str(value))
    except ValueError:
        return {"evidence": str(value)}
    return dict(parsed) if isinstance(parsed, dict) else {"evidence": parsed}


NOT_OURS = "Never delete it on this report's word: ledgerlens cannot prove whose it is."
"""The last step for what may belong to someone else (a ledger or object of unknown owner)."""


def lines(*cmds: str) -> str:
    """The non-empty commands, one a line."""
    return "\n".join(c for c in cmds if c)


def topic_step(f: Finding, lead: str, command: str) -> str:
    """``<lead>pulsar-admin topics <command> <topic>`` (the topic shell-quoted), ``''`` without a topic."""
    return f"{lead}pulsar-admin topics {command} {q(f.topic)}" if f.topic else ""


def ledger_meta(f: Finding) -> str:
    """The command showing the finding's ledger's BookKeeper metadata."""
    return f"bookkeeper shell ledgermetadata -ledgerid {f.ledger_id}"


def info_internal(f: Finding) -> str:
    """The command showing the broker's view of the finding's topic (``''`` without a topic)."""
    return topic_step(f, "", "info-internal")
