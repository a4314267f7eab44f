"""List the tiered-storage bucket: one OFFLOAD_OBJECTS row per offload data or index object.

Offload keys start with a UUID, so the key space splits into 16 hex prefixes (``0``..``f``), one
paginated listing each (a Spark task per prefix). Keys outside those prefixes are listed by three
range items so that every key is seen; keys that are not offload objects are counted, not rowed.
The boto3 client takes credentials from the standard chain; only endpoint and region are settings.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ledgerlens.errors import SourceError
from ledgerlens.formats.offload import parse_offload_key
from ledgerlens.settings.config import S3Source
from ledgerlens.sources.base import InventorySource, Row

__all__ = [
    "HEX_PREFIXES",
    "ListStats",
    "S3Listing",
    "WorkItem",
    "ObjectRead",
    "check_bucket",
    "head_user_metadata",
    "is_not_found",
    "open_object",
    "read_object",
    "list_offload_objects",
    "make_client",
    "work_items",
]

HEX_PREFIXES = tuple("0123456789abcdef")
_MAX = "\U0010ffff"


@dataclass(frozen=True)
class WorkItem:
    """One listing: keys with ``prefix``, or keys in ``(start_after, end_before)`` when prefix is None."""

    prefix: str | None = None
    start_after: str | None = None
    end_before: str | None = None

    def describe(self) -> str:
        if self.prefix is not None:
            return f"prefix {self.prefix!r}"
        return f"range ({self.start_after!r}, {self.end_before!r})"


def work_items() -> list[WorkItem]:
    """The 16 hex prefixes plus the ranges before ``0``, between ``9`` and ``a``, and after ``f``."""
    items = [WorkItem(prefix=p) for p in HEX_PREFIXES]
    items += [
        WorkItem(start_after=None, end_before="0"),
        WorkItem(start_after="9" + _MAX, end_before="a"),
        WorkItem(start_after="f" + _MAX, end_before=None),
    ]
    return items


@dataclass
class ListStats:
    """Counters of a listing."""

    keys: int = 0
    objects: int = 0
    not_offload: int = 0


def make_client(source: S3Source, *, max_attempts: int = 8) -> Any:
    """A boto3 S3 client for ``source`` (credentials from boto3's standard chain).

    ``max_attempts``: boto3's retry budget per request (adaptive mode); a few requests that must
    fail fast when the store is gone (re-verification) take a smaller one.
    """
    session = boto3.Session(profile_name=source.profile) if source.profile else boto3
    return session.client(
        "s3",
        endpoint_url=source.endpoint_url,
        region_name=source.region,
        config=Config(
            retries={"max_attempts": max_attempts, "mode": "adaptive"},
            max_pool_connections=source.max_in_flight,
        ),
    )


def _where(source: S3Source) -> str:
    return f"s3 {source.endpoint_url or 'aws'} bucket {source.bucket}"


def check_bucket(client: Any, source: S3Source) -> None:
    """Raise :class:`SourceError` naming the server when the bucket cannot be reached."""
    try:
        client.head_bucket(Bucket=source.bucket)
    except (ClientError, BotoCoreError) as e:
        raise SourceError(_where(source), f"cannot access the bucket: {e}") from e


def list_offload_objects(
    client: Any, bucket: str, items: Iterable[WorkItem | str] | None = None, *, stats: ListStats | None = None
) -> Iterator[dict[str, Any]]:
    """OFFLOAD_OBJECTS rows for the keys of ``items`` (prefix strings or :class:`WorkItem`).

    ``items`` defaults to :func:`work_items` (the whole bucket). Keys that are not offload data or
    index objects are counted in ``stats.not_offload``.
    """
    stats = stats if stats is not None else ListStats()
    paginator = client.get_paginator("list_objects_v2")
    for item in work_items() if items is None else items:
        w = WorkItem(prefix=item) if isinstance(item, str) else item
        kwargs: dict[str, Any] = {"Bucket": bucket, "PaginationConfig": {"PageSize": 1000}}
        if w.prefix is not None:
            kwargs["Prefix"] = w.prefix
        if w.start_after is not None:
            kwargs["StartAfter"] = w.start_after
        try:
            for page in paginator.paginate(**kwargs):
                stop = False
                for obj in page.get("Contents", ()):
                    key = obj["Key"]
                    if w.end_before is not None and key >= w.end_before:
                        stop = True
                        break
                    stats.keys += 1
                    parsed = parse_offload_key(key)
                    if parsed is None:
                        stats.not_offload += 1
                        continue
                    stats.objects += 1
                    yield {
                        "bucket": bucket,
                        "key": key,
                        "size": obj.get("Size"),
                        "last_modified_ms": int(obj["LastModified"].timestamp() * 1000),
                        "uuid": parsed.uuid,
                        "ledger_id": parsed.ledger_id,
                        "role": parsed.role,
                        "layout": parsed.layout,
                        "etag": obj.get("ETag"),
                    }
                if stop:
                    break
        except (ClientError, BotoCoreError) as e:
            raise SourceError(f"s3 bucket {bucket}", f"listing {w.describe()} failed: {e}") from e


def is_not_found(error: ClientError) -> bool:
    """True when an S3 error says the object (or key) does not exist."""
    code = str(error.response.get("Error", {}).get("Code", ""))
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return code in ("404", "NoSuchKey", "NotFound") or status == 404


def head_user_metadata(client: Any, bucket: str, key: str) -> dict[str, str] | None:
    """The object's user metadata (lower-cased keys), or None when the object does not exist."""
    try:
        resp = client.head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        if is_not_found(e):
            return None
        raise SourceError(f"s3 bucket {bucket}", f"HEAD {key} failed: {e}") from e
    return {k.lower(): v for k, v in resp.get("Metadata", {}).items()}


@dataclass(frozen=True)
class S3Listing(InventorySource):
    """The tiered-storage bucket as an inventory source: one partition per :func:`work_items` entry."""

    s3: S3Source
    kind: str = "s3"

    @property
    def stages(self) -> tuple[str, ...]:
        return ("offload_objects",)

    @property
    def location(self) -> str:
        return f"s3:{self.s3.endpoint_url or 'aws'}/{self.s3.bucket}"

    def check(self) -> None:
        check_bucket(make_client(self.s3), self.s3)

    def small(self, stage: str) -> bool:
        """One listing request: the whole bucket fits in a page of 1,000 keys."""
        try:
            page = make_client(self.s3).list_objects_v2(Bucket=self.s3.bucket, MaxKeys=1000)
        except (ClientError, BotoCoreError) as e:
            raise SourceError(f"s3 bucket {self.s3.bucket}", f"listing failed: {e}") from e
        return not page.get("IsTruncated", False)

    def plan(self, stage: str) -> list[str]:
        return [str(i) for i in range(len(work_items()))]

    def read(
        self, stage: str, partitions: Sequence[str], *, rate_limit: float | None, stats: Counter[str]
    ) -> Iterator[Row]:
        items = work_items()
        mine = [items[int(i)] for i in partitions]
        listed = ListStats()
        try:
            for row in list_offload_objects(make_client(self.s3), self.s3.bucket, mine, stats=listed):
                yield "offload_objects", row
        finally:
            stats.update({"s3.keys": listed.keys, "s3.not_offload": listed.not_offload})


@dataclass(frozen=True)
class ObjectRead:
    """Bytes of one GET (the whole object or a range) with the object's metadata."""

    data: bytes
    size: int | None  # the whole object's size (from Content-Range or Content-Length)
    metadata: dict[str, str]  # user metadata, keys lower-cased


def read_object(
    client: Any, bucket: str, key: str, *, start: int | None = None, end: int | None = None
) -> ObjectRead | None:
    """GET an object, or bytes ``start..end`` (inclusive) of it; None when it does not exist.

    A range past the end returns what there is (an empty object returns no bytes).

    Raises
    ------
    SourceError
        Any other S3 error, naming the key.
    """
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
    if start is not None:
        kwargs["Range"] = f"bytes={start}-{'' if end is None else end}"
    try:
        resp = client.get_object(**kwargs)
        data = resp["Body"].read()
    except ClientError as e:
        if is_not_found(e):
            return None
        if e.response.get("Error", {}).get("Code") == "InvalidRange":
            return ObjectRead(b"", 0, {})
        raise SourceError(f"s3 bucket {bucket}", f"GET {key} failed: {e}") from e
    except BotoCoreError as e:
        raise SourceError(f"s3 bucket {bucket}", f"GET {key} failed: {e}") from e
    size = resp.get("ContentLength")
    rng = resp.get("ContentRange")
    if rng and "/" in rng and rng.rsplit("/", 1)[1].isdigit():
        size = int(rng.rsplit("/", 1)[1])
    return ObjectRead(bytes(data), size, {k.lower(): v for k, v in resp.get("Metadata", {}).items()})


def open_object(client: Any, bucket: str, key: str) -> Any:
    """A streaming body of the whole object (``.read(n)``), or None when it does not exist.

    Raises
    ------
    SourceError
        Any other S3 error, naming the key.
    """
    try:
        return client.get_object(Bucket=bucket, Key=key)["Body"]
    except ClientError as e:
        if is_not_found(e):
            return None
        raise SourceError(f"s3 bucket {bucket}", f"GET {key} failed: {e}") from e
    except BotoCoreError as e:
        raise SourceError(f"s3 bucket {bucket}", f"GET {key} failed: {e}") from e
