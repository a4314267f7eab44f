"""Object keys of Kafka remote log segments, by remote storage layout.

Two layouts:

``s3-plugin``
    The widely used open-source S3/GCS/Azure remote storage plugin:
    ``<prefix><topic>-<topicId>/<partition>/<20-digit start offset>-<segmentId>.<suffix>`` with
    suffix ``log``, ``indexes`` or ``rsm-manifest``.
``local``
    Kafka's own local tiered storage (``LocalTieredStorage`` of its test artifact), under the
    ``kafka-tiered-storage`` directory of its ``dir``:
    ``<topic>-<partition>-<topicId>/<20-digit start offset>-<segmentId>.<suffix>`` with suffix
    ``log``, ``index``, ``timeindex``, ``snapshot``, ``leader_epoch_checkpoint`` or ``txnindex``.

Topic and segment ids are Kafka UUID strings (22 URL-safe base64 characters). Topic names may
contain ``-``; ids are found from the right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LAYOUTS", "REQUIRED_ROLES", "RemoteKey", "parse_remote_key", "segment_keys"]

LAYOUTS = ("s3-plugin", "local")
LOCAL_ROOT = "kafka-tiered-storage"

# Roles a complete segment has in each layout: a segment missing one of them is missing data.
REQUIRED_ROLES: dict[str, tuple[str, ...]] = {
    "s3-plugin": ("log", "indexes", "rsm-manifest"),
    "local": ("log", "index", "timeindex"),
}
_ROLES: dict[str, frozenset[str]] = {
    "s3-plugin": frozenset(("log", "indexes", "rsm-manifest")),
    "local": frozenset(("log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint", "txnindex")),
}
_ID = r"[A-Za-z0-9_-]{22}"
_FILE = re.compile(rf"^(?P<offset>\d{{1,20}})-(?P<segment>{_ID})\.(?P<role>[a-z_-]+)$")
_S3_DIR = re.compile(rf"^(?P<topic>.+)-(?P<topic_id>{_ID})$")
_LOCAL_DIR = re.compile(rf"^(?P<topic>.+)-(?P<partition>\d+)-(?P<topic_id>{_ID})$")


@dataclass(frozen=True)
class RemoteKey:
    """What a remote storage object key names."""

    topic: str
    topic_id: str
    partition: int
    start_offset: int
    segment_id: str
    role: str


def parse_remote_key(key: str, layout: str, prefix: str = "") -> RemoteKey | None:
    """The segment file a key names, or None when it is not one (other objects, other prefixes).

    ``key`` is the full object key (``s3-plugin``) or the path relative to the storage root
    (``local``: ``<topic>-<partition>-<topicId>/<file>``).
    """
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if layout == "s3-plugin":
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        d = _S3_DIR.match(parts[0])
        f = _FILE.match(parts[2])
        if d is None or f is None or f["role"] not in _ROLES[layout]:
            return None
        topic, topic_id, partition = d["topic"], d["topic_id"], int(parts[1])
    elif layout == "local":
        if len(parts) != 2:
            return None
        d = _LOCAL_DIR.match(parts[0])
        f = _FILE.match(parts[1])
        if d is None or f is None or f["role"] not in _ROLES[layout]:
            return None
        topic, topic_id, partition = d["topic"], d["topic_id"], int(d["partition"])
    else:
        raise ValueError(f"unknown remote storage layout {layout!r} (known: {', '.join(LAYOUTS)})")
    if partition > 0x7FFFFFFF:
        return None
    return RemoteKey(topic, topic_id, partition, int(f["offset"]), f["segment"], f["role"])


def segment_keys(
    layout: str,
    topic: str,
    topic_id: str,
    partition: int,
    start_offset: int,
    segment_id: str,
    prefix: str = "",
) -> dict[str, str]:
    """Keys of a segment's required objects, by role."""
    name = f"{start_offset:020d}-{segment_id}"
    if layout == "s3-plugin":
        base = f"{prefix}{topic}-{topic_id}/{partition}/{name}"
    elif layout == "local":
        base = f"{prefix}{topic}-{partition}-{topic_id}/{name}"
    else:
        raise ValueError(f"unknown remote storage layout {layout!r} (known: {', '.join(LAYOUTS)})")
    return {role: f"{base}.{role}" for role in REQUIRED_ROLES[layout]}
