"""``AuditRequest``: one frozen request, built the same way by the CLI, a context and the runbooks."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from ledgerlens import cli
from ledgerlens.errors import ConfigError
from ledgerlens.settings import contexts
from ledgerlens.settings.config import BookieSource, S3Source
from ledgerlens.settings.request import AuditRequest

pytestmark = pytest.mark.unit

CONTEXT = """\
[contexts.east.pulsar]
cluster-name = "east"
admin-url = "https://pulsar-east.example.com:8443"

[contexts.east.metadata]
zookeeper = "zk1:2181,zk2:2181/pulsar"
ledgers-root = "/bk/ledgers"

[contexts.east.s3]
bucket = "offload-east"
endpoint = "http://127.0.0.1:9000"
region = "eu-west-1"

[contexts.east.auth]
zookeeper-digest-env = "EAST_ZK_DIGEST"
admin-token-env = "EAST_TOKEN"

[contexts.east.audit]
min-orphan-age = "2d"
retention-grace = "12h"
deleted-tenants = ["gone"]
fail-on = "new-critical"
history-keep = 3

[contexts.east.spark]
master = "local[2]"
conf = { "spark.executor.memory" = "1g" }
"""

AS_OF = "2026-01-01T00:00:00Z"
DIGEST = "auditor:zk-digest-pw-5f2e"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhdWRpdG9yIn0.c2lnbmF0dXJlLXNlY3JldA"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No LEDGERLENS_* settings but the contexts file; the context's credentials set by reference."""
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_"):
            monkeypatch.delenv(k)
    path = tmp_path / "contexts.toml"
    path.write_text(CONTEXT)
    path.chmod(0o600)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(path))
    monkeypatch.setenv("EAST_ZK_DIGEST", DIGEST)
    monkeypatch.setenv("EAST_TOKEN", TOKEN)
    return {**os.environ}


def _cli_request(argv: list[str]) -> AuditRequest:
    args = cli.build_parser().parse_args(argv)
    cli.apply_sandbox(args)
    return cli._request(cli._settings(args), args)


def _without_origins(request: AuditRequest) -> AuditRequest:
    """The request without what records where each value came from (the context's origins) and
    without the store objects (compared by their description)."""
    return dataclasses.replace(request, context=None, stores=None)


def test_the_request_is_frozen(env: dict[str, str], tmp_path: Path) -> None:
    request = _cli_request(["audit", "--context", "east", "--out", str(tmp_path / "out")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.out_dir = tmp_path  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.config.min_orphan_age_s = 0  # type: ignore[misc]


def test_a_context_fills_every_part_of_the_request(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    request = _cli_request(
        ["audit", "--context", "east", "--out", str(out), "--as-of", AS_OF, "--read-bookies"]
    )
    assert request.out_dir == out
    assert request.zk is not None and request.zk.hosts == "zk1:2181,zk2:2181/pulsar"
    assert request.zk.ledgers_root == "/bk/ledgers" and request.zk.auth is not None
    assert request.s3 == S3Source(
        bucket="offload-east", endpoint_url="http://127.0.0.1:9000", region="eu-west-1"
    )
    assert request.config.min_orphan_age_s == 2 * 86400 and request.config.retention_grace_s == 12 * 3600
    assert request.config.as_of_ms == 1767225600000 and request.config.deleted_tenants == ("gone",)
    assert request.cluster_name == "east" and request.fail_on == "new-critical"
    assert request.history_keep == 3 and request.previous == ""
    assert request.spark_master == "local[2]" and request.spark_conf == {"spark.executor.memory": "1g"}
    assert request.bookie == BookieSource() and not request.deep_offload_check
    assert request.context_name == "east" and request.stores is not None


def test_flags_a_context_and_runbook_parameters_build_the_same_request(
    env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    from_context = _cli_request(["audit", "--context", "east", "--out", str(out), "--as-of", AS_OF])
    # the same inputs as flags, without a context (credentials by reference stay in the context)
    from_flags = _cli_request(
        [
            "audit",
            "--zookeeper",
            "zk1:2181,zk2:2181/pulsar",
            "--ledgers-root",
            "/bk/ledgers",
            "--cluster-name",
            "east",
            "--bucket",
            "offload-east",
            "--s3-endpoint",
            "http://127.0.0.1:9000",
            "--s3-region",
            "eu-west-1",
            "--min-orphan-age",
            "2d",
            "--retention-grace",
            "12h",
            "--deleted-tenant",
            "gone",
            "--fail-on",
            "new-critical",
            "--history-keep",
            "3",
            "--spark-master",
            "local[2]",
            "--out",
            str(out),
            "--as-of",
            AS_OF,
        ]
    )
    # the runbook: its parameters, then the context's settings, as notebooks/audit_ledgers.ipynb does
    given = {"zookeeper": "", "bucket": "", "as_of": AS_OF, "deleted_tenant": [], "min_orphan_age": ""}
    settings = contexts.resolve("east", flags=given, flag_layer="parameter")
    from_runbook = settings.audit_request(out, as_of=given["as_of"])

    assert _without_origins(from_runbook) == _without_origins(from_context)
    assert from_runbook.context == from_context.context  # the same settings, from the same origins
    assert from_runbook.stores is not None and from_context.stores is not None
    assert from_runbook.stores.describe() == from_context.stores.describe()

    # flags and the context agree on everything but the credentials, which only a context names
    assert from_context.zk is not None and from_flags.zk is not None and from_flags.zk.auth is None
    assert dataclasses.replace(from_context.zk, auth=None) == from_flags.zk
    same = dataclasses.replace(_without_origins(from_context), zk=from_flags.zk, spark_conf={})
    assert same == _without_origins(from_flags)
    assert from_flags.context is not None and from_flags.context["settings"]["s3.bucket"]["origin"] == (
        "flag --bucket"
    )


def test_the_repr_shows_the_inputs_and_no_credential(env: dict[str, str], tmp_path: Path) -> None:
    request = _cli_request(
        ["audit", "--context", "east", "--out", str(tmp_path), "--source", "admin", "--as-of", AS_OF]
    )
    shown = repr(request)
    assert (
        "offload-east" in shown and "zk1:2181,zk2:2181/pulsar" in shown and "min_orphan_age_s=172800" in shown
    )
    assert "cluster_name='east'" in shown and "fail_on='new-critical'" in shown
    for secret in (DIGEST, DIGEST.split(":", 1)[1], TOKEN):
        assert secret not in shown and secret not in str(request)
    # not even where the credentials are: the request names stores, not how to log in to them
    assert "EAST_ZK_DIGEST" not in shown and "EAST_TOKEN" not in shown


def test_library_callers_keep_the_long_signature() -> None:
    """``pipeline.run(spark, zk, s3, config, out_dir, ...)`` builds the same request."""
    import inspect

    from ledgerlens.audit import pipeline

    params = inspect.signature(pipeline.run).parameters
    assert list(params)[:5] == ["spark", "zk", "s3", "audit", "out_dir"]
    assert list(inspect.signature(pipeline.run_request).parameters)[:2] == ["spark", "request"]


def test_a_request_without_stores_is_refused_as_before(env: dict[str, str], tmp_path: Path) -> None:
    args = cli.build_parser().parse_args(["audit", "--out", str(tmp_path)])
    settings = contexts.resolve(None, flags=vars(args), env={})
    with pytest.raises(ConfigError, match="no ZooKeeper connect string"):
        cli._request(settings, args)


def test_the_kafka_request_is_the_same_from_flags_and_from_runbook_parameters(tmp_path: Path) -> None:
    from ledgerlens.kafka.request import KafkaAuditRequest

    out = tmp_path / "kafka"
    argv = ["kafka-audit", "--bootstrap-servers", "127.0.0.1:9092", "--bucket", "tiered", "--out", str(out)]
    args = cli.build_parser().parse_args([*argv, "--as-of", AS_OF, "--stuck-after", "2h"])
    from_cli = KafkaAuditRequest.from_flags(vars(args))
    params = {  # notebooks/kafka_remote_segments.ipynb's parameters (their defaults where not given)
        "bootstrap_servers": "127.0.0.1:9092",
        "metadata_dump": "",
        "bucket": "tiered",
        "s3_endpoint": "",
        "prefix": "",
        "remote_dir": "",
        "layout": "",
        "out_dir": str(out),
        "min_orphan_age": "24h",
        "stuck_after": "2h",
        "retention_grace": "6h",
        "as_of": AS_OF,
        "spark_master": "local[*]",
    }
    assert KafkaAuditRequest.from_flags(params) == from_cli
    assert from_cli.config.stuck_copy_s == 7200 and from_cli.config.as_of_ms == 1767225600000
    assert from_cli.store.layout == "s3-plugin" and from_cli.out_dir == out
    with pytest.raises(dataclasses.FrozenInstanceError):
        from_cli.dump = "x"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="--bucket NAME or --remote-dir DIR"):
        KafkaAuditRequest.from_flags({**params, "bucket": ""})
