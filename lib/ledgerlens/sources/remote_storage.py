"""List Kafka remote log segment files: an S3 bucket or Kafka's local tiered storage directory.

The driver lists only the top level (one directory per topic, or per topic-partition in the
local layout); each top-level entry is one work item, listed by one Spark task. Keys that are not
segment files of the configured layout are counted, not rowed. S3 credentials come from boto3's
standard chain; only the endpoint, region, bucket and prefix are settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.formats.kafka_remote_keys import LAYOUTS, LOCAL_ROOT, parse_remote_key

__all__ = ["RemoteStore", "list_items", "list_objects", "object_exists", "s3_client"]


@dataclass(frozen=True)
class RemoteStore:
    """Where the segment files are: ``bucket`` (S3 API) or ``directory`` (local), and their layout."""

    layout: str = "s3-plugin"
    bucket: str | None = None
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    directory: str | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"remote storage layout {self.layout!r}: expected one of {', '.join(LAYOUTS)}")
        if bool(self.bucket) == bool(self.directory):
            raise ConfigError("remote storage: give exactly one of a bucket or a local directory")

    @property
    def name(self) -> str:
        """``s3://bucket/prefix`` or ``file:///root``."""
        return f"s3://{self.bucket}/{self.prefix}" if self.bucket else f"file://{self.root()}"

    def root(self) -> Path:
        """The local storage root: ``directory/kafka-tiered-storage`` when it exists, else ``directory``."""
        d = Path(self.directory or ".")
        return d / LOCAL_ROOT if (d / LOCAL_ROOT).is_dir() else d


def s3_client(store: RemoteStore) -> Any:
    import boto3  # boto3: only for a bucket
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=store.endpoint_url,
        region_name=store.region,
        config=Config(retries={"max_attempts": 8, "mode": "adaptive"}),
    )


def list_items(store: RemoteStore) -> list[str]:
    """The top-level work items: key prefixes (S3) or directory names (local)."""
    if store.directory:
        root = store.root()
        try:
            return sorted(e.name for e in os.scandir(root) if e.is_dir())
        except OSError as e:
            raise SourceError(f"remote storage {root}", f"cannot list: {e.strerror}") from e
    from botocore.exceptions import BotoCoreError, ClientError  # botocore: only for a bucket

    client = s3_client(store)
    items: list[str] = []
    try:
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=store.prefix, Delimiter="/"
        ):
            items += [p["Prefix"] for p in page.get("CommonPrefixes", ())]
    except (ClientError, BotoCoreError) as e:
        raise SourceError(
            f"s3 {store.endpoint_url or 'aws'} bucket {store.bucket}", f"listing failed: {e}"
        ) from e
    return items


def _row(store: RemoteStore, key: str, size: int, mtime_ms: int, etag: str | None) -> dict[str, Any] | None:
    parsed = parse_remote_key(key, store.layout, store.prefix if store.bucket else "")
    if parsed is None:
        return None
    return {
        "store": store.name,
        "key": key,
        "size": size,
        "last_modified_ms": mtime_ms,
        "layout": store.layout,
        "topic": parsed.topic,
        "topic_id": parsed.topic_id,
        "partition": parsed.partition,
        "start_offset": parsed.start_offset,
        "segment_id": parsed.segment_id,
        "role": parsed.role,
        "etag": etag,
    }


def list_objects(
    store: RemoteStore, item: str, stats: dict[str, int] | None = None
) -> Iterator[dict[str, Any]]:
    """REMOTE_OBJECTS rows under one work item; other keys are counted in ``stats['not_segment']``."""
    stats = stats if stats is not None else {}
    if store.directory:
        base = store.root() / item
        try:
            entries = list(os.scandir(base))
        except FileNotFoundError:
            return  # removed since the top-level listing
        except OSError as e:
            raise SourceError(f"remote storage {base}", f"cannot list: {e.strerror}") from e
        for entry in entries:
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            row = _row(
                store,
                f"{item}/{entry.name}",
                st.st_size,
                int(st.st_mtime * 1000),
                f"{st.st_mtime_ns}-{st.st_size}",
            )
            if row is None:
                stats["not_segment"] = stats.get("not_segment", 0) + 1
                continue
            yield row
        return
    from botocore.exceptions import BotoCoreError, ClientError  # botocore: only for a bucket

    client = s3_client(store)
    try:
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=store.bucket, Prefix=item, PaginationConfig={"PageSize": 1000}
        ):
            for obj in page.get("Contents", ()):
                row = _row(
                    store,
                    obj["Key"],
                    int(obj["Size"]),
                    int(obj["LastModified"].timestamp() * 1000),
                    str(obj.get("ETag", "")).strip('"') or None,
                )
                if row is None:
                    stats["not_segment"] = stats.get("not_segment", 0) + 1
                    continue
                yield row
    except (ClientError, BotoCoreError) as e:
        raise SourceError(f"s3 bucket {store.bucket}", f"listing {item!r} failed: {e}") from e


def object_exists(store: RemoteStore, key: str, client: Any = None) -> tuple[bool, int | None]:
    """Whether ``key`` still exists, and its size (re-verification reads one object each)."""
    if store.directory:
        try:
            return True, (store.root() / key).stat().st_size
        except FileNotFoundError:
            return False, None
    from botocore.exceptions import ClientError  # botocore: only for a bucket

    client = client or s3_client(store)
    try:
        resp = client.head_object(Bucket=store.bucket, Key=key)
    except ClientError as e:
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404 or str(e.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
            return False, None
        raise SourceError(f"s3 bucket {store.bucket}", f"HEAD {key} failed: {e}") from e
    return True, int(resp.get("ContentLength", 0))
