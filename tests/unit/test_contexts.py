"""Contexts: the file, its validation and the layering default < context < environment < flags."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ledgerlens import cli
from ledgerlens.errors import ConfigError
from ledgerlens.settings import contexts
from ledgerlens.settings.config import S3Source, SecretRef, ZooKeeperAuth, ZooKeeperSource
from ledgerlens.settings.request import AuditRequest

pytestmark = pytest.mark.unit

PROD = """\
current = "prod-east"

[contexts.prod-east.pulsar]
cluster-name = "east"
admin-url = "https://pulsar-east.example.com:8443"

[contexts.prod-east.metadata]
zookeeper = "zk1:2181,zk2:2181/pulsar"
ledgers-root = "/bk/ledgers"

[contexts.prod-east.s3]
bucket = "offload-east"
endpoint = "https://s3.eu-west-1.amazonaws.com"
region = "eu-west-1"
profile = "audit"

[contexts.prod-east.auth]
zookeeper-digest-env = "EAST_ZK_DIGEST"

[contexts.prod-east.audit]
min-orphan-age = "2d"
retention-grace = "12h"
fail-on = "critical"

[contexts.prod-east.spark]
master = "spark://spark-east:7077"
conf = { "spark.executor.memory" = "4g" }

[contexts.staging]
metadata = { zookeeper = "zk-staging:2181" }
"""


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A clean environment (no LEDGERLENS_* settings) whose contexts file is tmp_path/contexts.toml."""
    for k in list(os.environ):
        if k.startswith("LEDGERLENS_"):
            monkeypatch.delenv(k)
    path = tmp_path / "contexts.toml"
    path.write_text(PROD)
    path.chmod(0o600)
    monkeypatch.setenv(contexts.CONFIG_ENV, str(path))
    return {contexts.CONFIG_ENV: str(path)}


def test_context_settings_and_origins(env: dict[str, str]) -> None:
    s = contexts.resolve("prod-east", env=env)
    path = env[contexts.CONFIG_ENV]
    assert s.context == "prod-east"
    assert s["metadata.zookeeper"] == "zk1:2181,zk2:2181/pulsar"
    assert s.origin("metadata.zookeeper") == f"context prod-east ({path}:8)"
    assert s.origin("s3.bucket") == f"context prod-east ({path}:12)"
    assert s["spark.conf"] == {"spark.executor.memory": "4g"}
    assert s.layer("metadata.managed-ledgers-root") == "default"
    zk, s3, audit = s.audit_inputs("2026-01-01T00:00:00Z")
    assert zk == ZooKeeperSource(
        hosts="zk1:2181,zk2:2181/pulsar",
        ledgers_root="/bk/ledgers",
        auth=ZooKeeperAuth(digest=SecretRef(env="EAST_ZK_DIGEST")),
    )
    assert s3 == S3Source(
        bucket="offload-east",
        endpoint_url="https://s3.eu-west-1.amazonaws.com",
        region="eu-west-1",
        profile="audit",
    )
    assert audit.min_orphan_age_s == 2 * 86400 and audit.retention_grace_s == 12 * 3600
    assert audit.as_of_ms == 1767225600000


def test_current_and_env_select_the_context(env: dict[str, str]) -> None:
    assert contexts.resolve(env=env).context == "prod-east"  # the file's current
    assert contexts.resolve(env={**env, contexts.CONTEXT_ENV: "staging"}).context == "staging"
    assert (
        contexts.resolve("staging", env=env)["metadata.zookeeper"] == "zk-staging:2181"
    )  # dotted inline table


def test_no_file_means_defaults_env_and_flags(tmp_path: Path) -> None:
    s = contexts.resolve(env={"HOME": str(tmp_path)}, flags={"zookeeper": "h:1"}, config=None)
    assert s.context is None and s["metadata.zookeeper"] == "h:1" and s["audit.min-orphan-age"] == "24h"
    with pytest.raises(ConfigError, match="context 'x': no contexts file"):
        contexts.resolve("x", env={"HOME": str(tmp_path)})


# Settings with an environment variable and a flag: (context value, environment value, flag value).
LAYERED: dict[str, tuple[str, str, str]] = {
    "metadata.zookeeper": ("zk-file:2181", "zk-env:2181", "zk-flag:2181"),
    "metadata.ledgers-root": ("/file", "/env", "/flag"),
    "s3.bucket": ("b-file", "b-env", "b-flag"),
    "s3.endpoint": ("http://file:1", "http://env:1", "http://flag:1"),
    "s3.region": ("r-file", "r-env", "r-flag"),
    "s3.profile": ("p-file", "p-env", "p-flag"),
    "audit.min-orphan-age": ("1h", "2h", "3h"),
    "audit.retention-grace": ("4h", "5h", "6h"),
    "audit.fail-on": ("critical", "warning", "critical"),
    "spark.master": ("local[1]", "local[2]", "local[3]"),
    "pulsar.service-url": ("pulsar://file:6650", "pulsar://env:6650", "pulsar://flag:6650"),
    "pulsar.admin-url": ("http://file:8080", "http://env:8080", "http://flag:8080"),
}


def test_layering_key_by_key(tmp_path: Path) -> None:
    """For every key: the context beats the default, the environment the context, a flag the environment."""
    by_table: dict[str, list[str]] = {}
    for key, (file_value, _, _) in LAYERED.items():
        table, name = key.split(".", 1)
        by_table.setdefault(table, []).append(f'{name} = "{file_value}"')
    path = tmp_path / "c.toml"
    path.write_text("".join(f"[contexts.c.{t}]\n" + "\n".join(lines) + "\n" for t, lines in by_table.items()))
    base = {contexts.CONFIG_ENV: str(path)}
    for key, (file_value, env_value, flag_value) in LAYERED.items():
        setting = contexts.BY_KEY[key]
        assert setting.env and setting.flag, key
        default = contexts.resolve(env={}, config=None, flags={})
        assert default[key] == setting.default and default.layer(key) == "default", key
        ctx = contexts.resolve("c", env=base)
        assert (ctx[key], ctx.layer(key)) == (file_value, "context"), key
        env = {**base, setting.env: env_value}
        envd = contexts.resolve("c", env=env)
        assert (envd[key], envd.origin(key)) == (env_value, f"env {setting.env}"), key
        flagged = contexts.resolve("c", env=env, flags={setting.flag: flag_value})
        assert (flagged[key], flagged.origin(key)) == (flag_value, f"flag {setting.flag_name}"), key
        # the other keys keep their context values
        for other, (other_file, _, _) in LAYERED.items():
            if other != key:
                assert flagged[other] == other_file, (key, other)


def test_env_values_are_typed(env: dict[str, str]) -> None:
    s = contexts.resolve(
        "staging",
        env={
            **env,
            "LEDGERLENS_S3_SHARED": "true",
            "LEDGERLENS_ZK_RATE_LIMIT": "500",
            "LEDGERLENS_SPARK_CONF": "a=1,b=2",
        },
    )
    assert (
        s["s3.shared"] is True
        and s["metadata.rate-limit"] == 500.0
        and s["spark.conf"] == {"a": "1", "b": "2"}
    )
    with pytest.raises(
        ConfigError, match="environment variable LEDGERLENS_ZK_RATE_LIMIT: metadata.rate-limit"
    ):
        contexts.resolve("staging", env={**env, "LEDGERLENS_ZK_RATE_LIMIT": "fast"})
    with pytest.raises(ConfigError, match="LEDGERLENS_MIN_ORPHAN_AGE"):
        contexts.resolve("staging", env={**env, "LEDGERLENS_MIN_ORPHAN_AGE": "soon"}).audit_config()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[contexts.a.metadata]\nzookeper = "h:1"\n', 2, "unknown key 'zookeper' in [contexts.a.metadata]"),
        (
            '[contexts.a]\nmetadata = { zookeeper = "h:1" }\n\n[contexts.a.s3]\nbuckett = "x"\n',
            5,
            "'buckett'",
        ),
        ('[contexts.a.metdata]\nzookeeper = "h:1"\n', 1, "unknown key 'metdata' in context 'a'"),
        ('curent = "a"\n[contexts.a.metadata]\nzookeeper = "h:1"\n', 1, "unknown key 'curent'"),
        ("[contexts.a.audit]\nmin-orphan-age = 24\n", 2, "audit.min-orphan-age must be a string"),
        ('[contexts.a.audit]\nfail-on = "sometimes"\n', 2, "expected one of"),
        ('[contexts.a.s3]\nendpoint = "https://AKIA:wJalr@s3.example.com"\n', 2, "credentials in the URL"),
        (
            '[contexts.a.spark]\nconf = { "spark.hadoop.fs.s3a.secret.key" = "x" }\n',
            2,
            "looks like a credential",
        ),
        ('current = "b"\n[contexts.a.metadata]\nzookeeper = "h:1"\n', 1, "names no context"),
    ],
)
def test_file_errors_name_file_line_and_key(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / "contexts.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        contexts.load(path)
    assert str(e.value).startswith(f"{path}:{line}: "), str(e.value)
    assert message in str(e.value)
    assert "wJalr" not in str(e.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "contexts.toml"
    path.write_text("[contexts.a\n")
    with pytest.raises(ConfigError, match=f"contexts file {path}: not valid TOML: .*line 1"):
        contexts.load(path)


def test_unknown_context_lists_the_known_ones(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"context 'prod-west' is not in .* \(known: prod-east, staging\)"):
        contexts.resolve("prod-west", env=env)


def test_file_readable_by_others_with_credentials_warns(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    path = Path(env[contexts.CONFIG_ENV])
    assert contexts.load(path).warnings == ()  # 0600
    path.chmod(0o644)
    loaded = contexts.load(path)
    assert loaded is not None and len(loaded.warnings) == 1
    assert "mode 0644" in loaded.warnings[0] and "prod-east" in loaded.warnings[0]
    assert f"chmod 600 {path}" in capsys.readouterr().err
    path.write_text('[contexts.a.metadata]\nzookeeper = "h:1"\n')  # no credential referenced: no warning
    assert contexts.load(path).warnings == ()


def test_secret_references_read_at_connect_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_ZK_DIGEST", "auditor:pa55-word")
    assert ZooKeeperAuth(digest=SecretRef(env="MY_ZK_DIGEST")).kazoo_options() == {
        "auth_data": [("digest", "auditor:pa55-word")]
    }
    monkeypatch.delenv("MY_ZK_DIGEST")
    with pytest.raises(ConfigError, match="env MY_ZK_DIGEST: the variable is not set"):
        ZooKeeperAuth(digest=SecretRef(env="MY_ZK_DIGEST")).kazoo_options()
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        "Server { x required; };\nClient {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        '  username="bob"\n  password="b0b-secret";\n};\n'
    )
    assert ZooKeeperAuth(sasl_jaas_file=str(jaas)).kazoo_options() == {
        "sasl_options": {"mechanism": "DIGEST-MD5", "username": "bob", "password": "b0b-secret"}
    }
    bad = tmp_path / "digest"
    bad.write_text("no-colon\n")
    with pytest.raises(ConfigError, match=f"file {bad}: expected user:password") as e:
        ZooKeeperAuth(digest=SecretRef(file=str(bad))).kazoo_options()
    assert "no-colon" not in str(e.value)


def test_show_redacts_every_secret(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token"
    token.write_text("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJlLXZhbHVl\n")
    monkeypatch.setenv("EAST_ZK_DIGEST", "auditor:zk-digest-pw")
    path = Path(env[contexts.CONFIG_ENV])
    path.write_text(
        PROD.replace(
            'zookeeper-digest-env = "EAST_ZK_DIGEST"',
            f'zookeeper-digest-env = "EAST_ZK_DIGEST"\nadmin-token-file = "{token}"',
        )
    )
    monkeypatch.setenv("LEDGERLENS_ADMIN_URL", "https://admin:hunter2-pw@pulsar-east.example.com:8443")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-value-1")
    assert cli.main(["contexts", "show", "prod-east"]) == 0
    out = capsys.readouterr().out
    for secret in (
        "zk-digest-pw",
        "eyJhbGciOiJIUzI1NiJ9",
        "c2lnbmF0dXJlLXZhbHVl",
        "hunter2-pw",
        "aws-secret-value-1",
    ):
        assert secret not in out
    assert "EAST_ZK_DIGEST (set)" in out and f"{token} (readable)" in out
    assert "env LEDGERLENS_ADMIN_URL" in out and "https://***@pulsar-east.example.com:8443" in out


def test_list_marks_the_context_in_use(env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["contexts", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["NAME", "CLUSTER", "METADATA", "BUCKET"]
    assert lines[2].split() == ["*", "prod-east", "east", "zk1:2181,zk2:2181/pulsar", "offload-east"]
    assert lines[3].split() == ["staging", "zk-staging:2181"]


def test_audit_by_context_equals_audit_by_flags(
    env: dict[str, str], fake_pipeline: Any, tmp_path: Path
) -> None:
    assert cli.main(["audit", "--context", "prod-east", "--out", str(tmp_path / "a")]) == 0
    assert (
        cli.main(
            [
                "audit",
                "--zookeeper",
                "zk1:2181,zk2:2181/pulsar",
                "--ledgers-root",
                "/bk/ledgers",
                "--bucket",
                "offload-east",
                "--s3-endpoint",
                "https://s3.eu-west-1.amazonaws.com",
                "--s3-region",
                "eu-west-1",
                "--aws-profile",
                "audit",
                "--min-orphan-age",
                "2d",
                "--retention-grace",
                "12h",
                "--spark-master",
                "spark://spark-east:7077",
                "--out",
                str(tmp_path / "b"),
                "--context",
                "staging",
            ]
        )
        == 0
    )
    (by_name, by_flags) = fake_pipeline.calls
    # as_of_ms is 'now' at each run: compare everything else
    assert by_name[1] == ZooKeeperSource(
        hosts="zk1:2181,zk2:2181/pulsar",
        ledgers_root="/bk/ledgers",
        auth=ZooKeeperAuth(SecretRef(env="EAST_ZK_DIGEST")),
    )
    assert by_flags[1] == ZooKeeperSource(hosts="zk1:2181,zk2:2181/pulsar", ledgers_root="/bk/ledgers")
    assert by_name[2] == by_flags[2]
    assert by_name[3].min_orphan_age_s == by_flags[3].min_orphan_age_s == 2 * 86400
    name_ctx, flags_ctx = fake_pipeline.contexts
    assert name_ctx["name"] == "prod-east" and flags_ctx["name"] == "staging"
    assert name_ctx["settings"]["s3.bucket"] == {
        "value": "offload-east",
        "origin": f"context prod-east ({env[contexts.CONFIG_ENV]}:12)",
    }
    assert flags_ctx["settings"]["s3.bucket"] == {"value": "offload-east", "origin": "flag --bucket"}
    assert fake_pipeline.masters == ["spark://spark-east:7077"] * 2
    assert fake_pipeline.confs == [{"spark.executor.memory": "4g"}, {}]


def test_context_fail_on_sets_the_exit_status(
    env: dict[str, str], fake_pipeline: Any, tmp_path: Path
) -> None:
    fake_pipeline.summary = {"counts_by_severity": {"critical": 1}, "total_findings": 1}
    assert cli.main(["audit", "--context", "prod-east", "--out", str(tmp_path)]) == cli.EXIT_FINDINGS
    assert cli.main(["audit", "--context", "staging", "--out", str(tmp_path)]) == cli.EXIT_OK


def test_missing_zookeeper_names_every_way_to_give_it(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    Path(env[contexts.CONFIG_ENV]).write_text('[contexts.x.s3]\nbucket = "b"\n')
    assert cli.main(["audit", "--context", "x", "--out", "o"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert (
        "--zookeeper" in err
        and "--sandbox" in err
        and "--context" in err
        and len(err.strip().splitlines()) == 1
    )


@pytest.fixture
def fake_pipeline(monkeypatch: pytest.MonkeyPatch) -> Any:
    import sys
    import types

    from ledgerlens.audit import pipeline

    state = types.SimpleNamespace(
        calls=[], contexts=[], masters=[], confs=[], summary={}, stores=[], requests=[]
    )

    def run_request(spark: Any, request: AuditRequest, **_: Any) -> Any:
        state.requests.append(request)
        state.calls.append((spark, request.zk, request.s3, request.config))
        state.contexts.append(request.context)
        state.stores.append(request.stores)
        out = request.out_dir
        return types.SimpleNamespace(
            out_dir=out, findings_path=Path(out) / "findings.parquet", summary=state.summary
        )

    class Spark:
        def stop(self) -> None:
            pass

    def session(
        master: str, conf: dict[str, str] | None = None, *, znodes: int | None = None
    ) -> tuple[Any, bool]:
        state.masters.append(master)
        state.confs.append(conf)
        return Spark(), True

    module = types.ModuleType("ledgerlens.audit.pipeline")
    module.run_request = run_request  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ledgerlens.audit.pipeline", module)
    import ledgerlens.audit

    monkeypatch.setattr(ledgerlens.audit, "pipeline", module, raising=False)
    monkeypatch.setattr(cli, "_spark_session", session)
    # no servers behind these contexts: nothing seen
    monkeypatch.setattr(cli, "_preflight", lambda *a, **k: {"stores": [], "znodes": None})
    del pipeline
    return state


def test_credentials_read_through_references_are_redacted_everywhere(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A credential whose variable's name looks harmless is still redacted once a context names it."""
    from ledgerlens.settings.redact import redact

    monkeypatch.setenv("EAST_ZK_DIGEST", "auditor:harmless-looking-pw")
    jaas = tmp_path / "jaas.conf"
    jaas.write_text('Client { x.DigestLoginModule required username="bob" password="jaas-pw-123"; };')
    monkeypatch.setenv("LEDGERLENS_ZK_JAAS_FILE", str(jaas))
    contexts.resolve("prod-east", env={**os.environ})
    line = "connected as auditor:harmless-looking-pw, then harmless-looking-pw alone, jaas-pw-123"
    assert redact(line) == "connected as ***, then *** alone, ***"


def test_repeatable_settings_layer_as_lists(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[contexts.c.metadata]\npulsar = ["zk:a:2181,b:2181/p1", "zk:c:2181/p2"]\n')
    env = {contexts.CONFIG_ENV: str(path)}
    assert contexts.resolve("c", env=env)["metadata.pulsar"] == ["zk:a:2181,b:2181/p1", "zk:c:2181/p2"]
    envd = contexts.resolve("c", env={**env, "LEDGERLENS_PULSAR_METADATA": "zk:e:1,f:1/x  zk:g:1"})
    assert envd["metadata.pulsar"] == ["zk:e:1,f:1/x", "zk:g:1"]
    flagged = contexts.resolve("c", env=env, flags={"pulsar_metadata": ["zk:h:1"], "deleted_tenant": []})
    assert (
        flagged["metadata.pulsar"] == ["zk:h:1"]
        and flagged.origin("metadata.pulsar") == "flag --pulsar-metadata"
    )
    assert flagged["audit.deleted-tenants"] == [] and flagged.layer("audit.deleted-tenants") == "default"
