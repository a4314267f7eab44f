"""Findings evidence and summaries pass through the one redaction function before they are written."""

from __future__ import annotations

import json

import pytest

from ledgerlens.audit.pipeline import redacted_evidence
from ledgerlens.inventory import schemas

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


@pytest.mark.parametrize("on_driver", [True, False])
def test_written_findings_keep_their_order_and_are_redacted(  # type: ignore[no-untyped-def]
    spark, tmp_path, monkeypatch: pytest.MonkeyPatch, on_driver: bool
) -> None:
    """Both ways of writing findings.parquet (the driver up to DRIVER_FINDINGS rows, Spark beyond)
    give the same table: every column as declared, the rows in the given order, evidence redacted."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from ledgerlens.audit import pipeline

    if not on_driver:
        monkeypatch.setattr(pipeline, "DRIVER_FINDINGS", 2)
    secret = "env-secret-value-5678"
    monkeypatch.setenv("LEDGERLENS_TEST_TOKEN", secret)
    rows = [
        schemas.to_row(
            schemas.FINDINGS,
            {
                "kind": "orphan_ledger",
                "severity": "warning",
                "ledger_id": i,
                "bytes": 1000 * i,
                "evidence": json.dumps({"seen": f"token {secret} on ledger {i}"}) if i % 2 else None,
                "age_seconds": 86400 + i,
            },
        )
        for i in range(7)
    ]
    df = spark.createDataFrame(rows, schemas.FINDINGS).orderBy(F.col("ledger_id").desc())
    path = tmp_path / "findings.parquet"
    pipeline.write_findings(df, path)
    assert len([p for p in path.iterdir() if p.suffix == ".parquet"]) == 1
    table = pq.read_table(path)
    got = spark.read.schema(schemas.FINDINGS).parquet(str(path)).collect()
    assert [r["ledger_id"] for r in got] == [6, 5, 4, 3, 2, 1, 0]
    assert table.column("ledger_id").to_pylist() == [6, 5, 4, 3, 2, 1, 0]
    assert [f.name for f in table.schema] == schemas.columns(schemas.FINDINGS)
    assert [r["bytes"] for r in got] == [6000, 5000, 4000, 3000, 2000, 1000, 0]
    evidence = [r["evidence"] for r in got]
    assert evidence[1] == json.dumps({"seen": "token *** on ledger 5"})
    assert evidence[0] is None and secret not in "".join(e for e in evidence if e)
