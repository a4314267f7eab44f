"""Namespace policies: the JSON Pulsar stores at ``/admin/policies/<tenant>/<ns>``.

Field names are those of Pulsar's ``Policies`` class (Jackson, field names as declared):
``retention_policies {retentionTimeInMinutes, retentionSizeInMB}``, ``offload_threshold``,
``offload_deletion_lag_ms``, ``offload_policies {managedLedgerOffload*...}`` and ``deleted``.
``offload_policies`` values win over the legacy top-level ones when set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ledgerlens.errors import DecodeError

_GCS_DRIVERS = frozenset({"google-cloud-storage"})


@dataclass(frozen=True)
class NamespacePolicies:
    """What the audit needs from a namespace's policies; None means not set (broker default)."""

    retention_minutes: int | None
    retention_mb: int | None
    offload_deletion_lag_ms: int | None
    offload_threshold_bytes: int | None
    offload_driver: str | None
    offload_bucket: str | None
    deleted: bool


def _int(obj: dict[str, Any], key: str, path: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(path, f"policies {where}{key} is {value!r}, expected an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise DecodeError(path, f"policies {where}{key} is {value!r}, expected an integer")
        value = int(value)
    return value


def _str(obj: dict[str, Any], key: str, path: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise DecodeError(path, f"policies {where}{key} is {value!r}, expected a string")
    return value or None


def _obj(obj: dict[str, Any], key: str, path: str) -> dict[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError(path, f"policies {key} is {type(value).__name__}, expected an object")
    return value


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def decode_namespace_policies(data: bytes, *, path: str) -> NamespacePolicies:
    """Decode a namespace policies node.

    Parameters
    ----------
    data : bytes
        The node value (UTF-8 JSON object).
    path : str
        The node path, used in errors.

    Raises
    ------
    DecodeError
        Not UTF-8, not JSON, not an object, or a field of the wrong type.
    """
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DecodeError(path, f"namespace policies are not UTF-8: {exc}") from exc
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DecodeError(path, f"namespace policies are not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise DecodeError(path, f"namespace policies are a JSON {type(doc).__name__}, expected an object")
    retention = _obj(doc, "retention_policies", path)
    offload = _obj(doc, "offload_policies", path)
    op = "offload_policies."
    rp = "retention_policies."
    driver = _str(offload, "managedLedgerOffloadDriver", path, op)
    s3_bucket = _str(offload, "s3ManagedLedgerOffloadBucket", path, op)
    gcs_bucket = _str(offload, "gcsManagedLedgerOffloadBucket", path, op)
    generic_bucket = _str(offload, "managedLedgerOffloadBucket", path, op)
    if driver is not None and driver.lower() in _GCS_DRIVERS:
        bucket = _first(generic_bucket, gcs_bucket, s3_bucket)
    else:
        bucket = _first(generic_bucket, s3_bucket, gcs_bucket)
    deleted = doc.get("deleted", False)
    if not isinstance(deleted, bool):
        raise DecodeError(path, f"policies deleted is {deleted!r}, expected a boolean")
    return NamespacePolicies(
        retention_minutes=_int(retention, "retentionTimeInMinutes", path, rp),
        retention_mb=_int(retention, "retentionSizeInMB", path, rp),
        offload_deletion_lag_ms=_first(
            _int(offload, "managedLedgerOffloadDeletionLagInMillis", path, op),
            _int(doc, "offload_deletion_lag_ms", path, ""),
        ),
        offload_threshold_bytes=_first(
            _int(offload, "managedLedgerOffloadThresholdInBytes", path, op),
            _int(doc, "offload_threshold", path, ""),
        ),
        offload_driver=driver,
        offload_bucket=bucket,
        deleted=deleted,
    )
