from __future__ import annotations

import json

import pytest

from ledgerlens.errors import DecodeError
from ledgerlens.formats.policies import NamespacePolicies, decode_namespace_policies

pytestmark = pytest.mark.unit

PATH = "/admin/policies/public/default"


def decode(doc) -> NamespacePolicies:
    return decode_namespace_policies(json.dumps(doc).encode(), path=PATH)


def test_full_policies():
    doc = {
        "auth_policies": {"namespace_auth": {}},
        "replication_clusters": ["standalone"],
        "retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": 1024},
        "deleted": False,
        "offload_threshold": -1,
        "offload_deletion_lag_ms": 1000,
        "offload_policies": {
            "managedLedgerOffloadDriver": "aws-s3",
            "managedLedgerOffloadThresholdInBytes": 1048576,
            "managedLedgerOffloadDeletionLagInMillis": 14400000,
            "s3ManagedLedgerOffloadBucket": "offload-bucket",
            "s3ManagedLedgerOffloadRegion": "eu-west-1",
        },
    }
    assert decode(doc) == NamespacePolicies(
        retention_minutes=60,
        retention_mb=1024,
        offload_deletion_lag_ms=14400000,
        offload_threshold_bytes=1048576,
        offload_driver="aws-s3",
        offload_bucket="offload-bucket",
        deleted=False,
    )


def test_legacy_top_level_fields():
    doc = {
        "retention_policies": None,
        "offload_threshold": 5000,
        "offload_deletion_lag_ms": 1000,
        "offload_policies": {"managedLedgerOffloadThresholdInBytes": None},
        "deleted": True,
    }
    p = decode(doc)
    assert (p.retention_minutes, p.retention_mb) == (None, None)
    assert (p.offload_threshold_bytes, p.offload_deletion_lag_ms) == (5000, 1000)
    assert (p.offload_driver, p.offload_bucket) == (None, None)
    assert p.deleted is True


def test_empty_object():
    assert decode({}) == NamespacePolicies(None, None, None, None, None, None, False)


def test_buckets():
    gcs = {"managedLedgerOffloadDriver": "google-cloud-storage", "gcsManagedLedgerOffloadBucket": "g"}
    assert decode({"offload_policies": gcs}).offload_bucket == "g"
    generic = {"managedLedgerOffloadDriver": "aws-s3", "managedLedgerOffloadBucket": "m"}
    assert decode({"offload_policies": generic}).offload_bucket == "m"


def test_infinite_retention():
    p = decode({"retention_policies": {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}})
    assert (p.retention_minutes, p.retention_mb) == (-1, -1)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "list"),
        (b'"x"', "str"),
        (b"\xff\xfe", "UTF-8"),
        (b"", "not JSON"),
        (b'{"retention_policies": 5}', "retention_policies"),
        (b'{"retention_policies": {"retentionTimeInMinutes": "x"}}', "retentionTimeInMinutes"),
        (b'{"deleted": "yes"}', "deleted"),
        (b'{"offload_policies": {"managedLedgerOffloadDriver": 3}}', "managedLedgerOffloadDriver"),
    ],
)
def test_errors(data, fragment):
    with pytest.raises(DecodeError) as info:
        decode_namespace_policies(data, path=PATH)
    assert info.value.where == PATH
    assert PATH in str(info.value)
    assert fragment in info.value.problem
