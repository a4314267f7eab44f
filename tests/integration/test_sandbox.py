"""The sandbox: servers start and answer, the generator writes what its ground truth claims."""

from __future__ import annotations

import boto3
import pytest

pytestmark = pytest.mark.integration


def test_zookeeper_answers(zk_client, fresh_root):
    zk_client.create(fresh_root + "/x", b"hello", makepath=True)
    assert zk_client.get(fresh_root + "/x")[0] == b"hello"


def test_s3_answers(s3_server, bucket):
    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url)
    s3.put_object(Bucket=bucket, Key="k", Body=b"v", Metadata={"role": "data"})
    head = s3.head_object(Bucket=bucket, Key="k")
    assert head["Metadata"]["role"] == "data"


def test_spark_runs(spark):
    assert spark.range(10).count() == 10
