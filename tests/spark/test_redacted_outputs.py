"""Findings evidence and summaries pass through the one redaction function before they are written."""

from __future__ import annotations

import json

import pytest

from ledgerlens import schemas
from ledgerlens.pipeline import redacted_evidence

pytestmark = [pytest.mark.spark, pytest.mark.unit]


def test_evidence_is_redacted_identifiers_are_not(spark, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    secret = "env-secret-value-1234"
    monkeypatch.setenv("LEDGERLENS_TEST_PASSWORD", secret)
    evidence = json.dumps({"problem": f"GET https://KEY:SECRET@s3.local/b failed ({secret})", "table": "x"})
    row = {
        "kind": "corrupt_metadata",
        "severity": "critical",
        "path": "/managed-ledgers/t/ns/persistent/token=abc",
        "object_key": "offload/password=1/ledger-7",
        "evidence": evidence,
    }
    df = spark.createDataFrame(
        [schemas.to_row(schemas.FINDINGS, row), schemas.to_row(schemas.FINDINGS, {})], schemas.FINDINGS
    )
    out = [r.asDict() for r in redacted_evidence(df).collect()]
    assert json.loads(out[0]["evidence"]) == {
        "problem": "GET https://***@s3.local/b failed (***)",
        "table": "x",
    }
    assert out[0]["path"] == row["path"] and out[0]["object_key"] == row["object_key"]
    assert out[1]["evidence"] is None
