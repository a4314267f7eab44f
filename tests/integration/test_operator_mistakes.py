# ruff: noqa: E501  (exact one-line error messages are asserted whole)
"""Operator mistakes fail before Spark starts: one line, exit 2, within a time bound, ``--out`` untouched.

Each test is a row of issue 7's lists, run through ``ledgerlens audit`` / ``report`` in-process
against the real local ZooKeeper and S3 server. Spark must not start (the guard fails the test).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from generated import generated_cluster
from ledgerlens import cli
from ledgerlens.runtime.outdir import OutputDir
from ledgerlens_sandbox.cluster import default_now_ms

pytestmark = pytest.mark.integration
BOUND = (
    20.0  # seconds: each check has its own timeout (ZooKeeper 10 s, S3 10 s); this one absorbs a busy CI box
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def healthy(zookeeper: Any, s3_server: Any) -> dict[str, str]:
    """A generated healthy cluster under its own chroot, with its bucket (holding offloaded objects)."""
    from kazoo.client import KazooClient

    import ledgerlens.report  # noqa: F401 - imported once here: the time bounds are about waiting, not imports

    c = generated_cluster(zookeeper, s3_server, "healthy", now_ms=default_now_ms(), scenario="healthy")
    hosts, bucket = c["hosts"], c["bucket"]
    empty = f"/empty-{uuid.uuid4().hex[:8]}"  # a chroot with the nodes of a fresh cluster, no topic
    client = KazooClient(hosts=zookeeper.hosts)
    client.start()
    for node in ("ledgers/LAYOUT", "ledgers/INSTANCEID", "ledgers/available", "managed-ledgers"):
        client.ensure_path(f"{empty}/{node}")
    client.stop()
    return {"hosts": hosts, "bare": zookeeper.hosts, "empty": zookeeper.hosts + empty, "bucket": bucket,
            "endpoint": s3_server.endpoint_url}  # fmt: skip


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(master: str) -> Any:
        raise AssertionError("Spark started before the inputs were checked")

    monkeypatch.setattr(cli, "_spark_session", refuse)
    yield


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], float]:
    capsys.readouterr()
    t0 = time.monotonic()
    code = cli.main(list(argv))
    elapsed = time.monotonic() - t0
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err.splitlines(), elapsed


def audit_args(c: dict[str, str], out: Path, **over: str) -> list[str]:
    opts = {
        "--zookeeper": c["hosts"],
        "--s3-endpoint": c["endpoint"],
        "--bucket": c["bucket"],
        "--out": str(out),
    }
    opts.update({k.replace("_", "-"): v for k, v in over.items()})
    return ["audit", *[x for kv in opts.items() for x in kv]]


def one_error(code: int, err: list[str], elapsed: float, bound: float, command: str = "audit") -> str:
    assert code == 2, err
    assert len(err) == 1, err
    assert err[0].startswith(f"ledgerlens {command}: error: "), err
    assert elapsed < bound, f"took {elapsed:.1f} s"
    return err[0][len(f"ledgerlens {command}: error: ") :]


# -- the table ---------------------------------------------------------------------------------


def test_chroot_that_does_not_exist(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    hosts = healthy["bare"] + "/pulsar-typo"
    msg = one_error(*run(capsys, *audit_args(healthy, out, __zookeeper=hosts)), bound=BOUND)
    assert (
        msg
        == f"zookeeper {hosts}: chroot /pulsar-typo does not exist; check the path after host:port in --zookeeper"
    )
    assert not out.exists()


def test_ledgers_root_typo(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    msg = one_error(*run(capsys, *audit_args(healthy, out, __ledgers_root="/ledger")), bound=BOUND)
    assert msg == (
        f"zookeeper {healthy['hosts']}: /ledger does not exist, so it is not a BookKeeper ledgers root; "
        "check --ledgers-root and the chroot in --zookeeper (if this is really intended, pass --allow-empty-metadata)"
    )
    assert not out.exists()


def test_empty_metadata_next_to_a_full_bucket(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # an earlier run's result stays as it was
    msg = one_error(*run(capsys, *audit_args(healthy, out, __zookeeper=healthy["empty"])), bound=BOUND)
    assert msg == (
        f"zookeeper {healthy['empty']}: no managed ledger found, but bucket {healthy['bucket']} holds objects: "
        "the metadata looked at is not this storage's cluster (wrong chroot, or a bucket shared with another "
        "cluster); every object would look orphaned (if this is really intended, pass --allow-empty-metadata)"
    )
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_second_run_into_the_same_out(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    with OutputDir(out):
        msg = one_error(*run(capsys, *audit_args(healthy, out)), bound=BOUND)
    assert msg.startswith(f"--out {out} is in use by another ledgerlens run (pid {os.getpid()} on ")
    assert ", started 20" in msg and msg.endswith("wait for it to finish or choose another --out")
    assert not out.exists()  # the holder created it and published nothing


@pytest.mark.parametrize("command", ["audit", "report"])
def test_credentials_in_the_endpoint_url(healthy, tmp_path, capsys, no_spark, command) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    endpoint = healthy["endpoint"].replace("http://", "http://AKIAKEYID:S3CRETVALUE@")
    argv = audit_args(healthy, out, __s3_endpoint=endpoint)
    argv[0] = command
    code, err, elapsed = run(capsys, *argv)
    msg = one_error(code, err, elapsed, bound=BOUND, command=command)
    shown = healthy["endpoint"].replace("http://", "http://***@")
    assert msg.startswith(f"--s3-endpoint {shown}: credentials in the URL are refused")
    assert "S3CRETVALUE" not in "\n".join(err) and "AKIAKEYID" not in "\n".join(err)
    assert not out.exists()  # no executed notebook holding it


# -- the slower or noisier failures --------------------------------------------------------------


def test_refused_zookeeper_fails_fast_naming_it(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    port = _free_port()
    msg = one_error(
        *run(capsys, *audit_args(healthy, tmp_path / "o", __zookeeper=f"127.0.0.1:{port}")), bound=10
    )
    assert msg == f"zookeeper 127.0.0.1:{port}: unreachable: 127.0.0.1:{port} connection refused"


def test_unresolvable_zookeeper_fails_fast_naming_it(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    hosts = "zk-typo.invalid:2181/pulsar"
    msg = one_error(*run(capsys, *audit_args(healthy, tmp_path / "o", __zookeeper=hosts)), bound=10)
    assert msg.startswith(
        "zookeeper zk-typo.invalid:2181: unreachable: zk-typo.invalid:2181 name 'zk-typo.invalid' "
    )
    assert "does not resolve" in msg


def test_read_only_out(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "ro"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    subprocess.run(["chattr", "+i", str(out)], check=True)  # read-only even for root
    try:
        msg = one_error(*run(capsys, *audit_args(healthy, out)), bound=BOUND)
    finally:
        subprocess.run(["chattr", "-i", str(out)], check=True)
    assert msg.startswith(f"--out {out}: ") and ("not writable" in msg or "cannot write there" in msg)
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


def test_out_naming_a_file(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "findings.txt"
    f.write_text("mine")
    msg = one_error(*run(capsys, *audit_args(healthy, f)), bound=BOUND)
    assert msg == f"--out {f}: is a file, not a directory"
    assert f.read_text() == "mine"


def test_port_that_is_not_a_number(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    msg = one_error(
        *run(capsys, *audit_args(healthy, tmp_path / "o", __zookeeper="zk1:notaport")), bound=BOUND
    )
    assert msg == "--zookeeper 'zk1:notaport': bad port 'notaport' in 'zk1:notaport' (expected 1-65535)"


def test_unreachable_spark_master(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    port = _free_port()
    master = f"spark://127.0.0.1:{port}"
    msg = one_error(*run(capsys, *audit_args(healthy, tmp_path / "o", __spark_master=master)), bound=BOUND)
    assert msg == f"spark master {master}: unreachable: 127.0.0.1:{port} connection refused"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--min-orphan-age", "99999999999999999999d", "--min-orphan-age: audit.min-orphan-age: duration '99999999999999999999d': out of range (at most 3650d)"),
        ("--retention-grace", "5000d", "--retention-grace: audit.retention-grace: duration '5000d': out of range (at most 3650d)"),
        ("--as-of", "99999999999999999999", "time '99999999999999999999': out of range (expected a time between 2000 and 2200)"),
    ],
)  # fmt: skip
def test_absurd_durations_and_times(healthy, tmp_path, capsys, no_spark, option, value, message) -> None:  # type: ignore[no-untyped-def]
    msg = one_error(
        *run(capsys, *audit_args(healthy, tmp_path / "o", **{option.replace("-", "_"): value})), bound=2
    )
    assert msg == message


def test_bucket_that_does_not_exist(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    msg = one_error(
        *run(capsys, *audit_args(healthy, tmp_path / "o", __bucket="no-such-bucket")), bound=BOUND
    )
    assert msg == (
        f"s3 {healthy['endpoint']} bucket no-such-bucket: the bucket does not exist (check --bucket and --s3-endpoint)"
    )


def test_no_credentials_names_where_boto3_looked(healthy, tmp_path, capsys, no_spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    msg = one_error(*run(capsys, *audit_args(healthy, tmp_path / "o")), bound=BOUND)
    assert msg.startswith(
        f"s3 {healthy['endpoint']} bucket {healthy['bucket']}: no AWS credentials found; boto3 looked at: env, "
    )
    assert "shared-credentials-file" in msg and "iam-role" in msg


def test_debug_shows_the_traceback(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    code, err, _ = run(capsys, *audit_args(healthy, tmp_path / "o", __zookeeper="zk1:notaport"), "--debug")
    assert code == 2 and err[0] == "Traceback (most recent call last):"
    assert (
        err[-1]
        == "ledgerlens audit: error: --zookeeper 'zk1:notaport': bad port 'notaport' in 'zk1:notaport' (expected 1-65535)"
    )


# -- the same gates on separate stores and on a ZooKeeper data directory ---------------------------


def test_each_separate_store_is_checked_for_its_part(healthy, tmp_path, capsys, no_spark) -> None:  # type: ignore[no-untyped-def]
    """--bookkeeper-metadata is checked for its ledgers root, each --pulsar-metadata for its chroot."""
    bare, chroot = healthy["bare"], healthy["hosts"][len(healthy["bare"]) :]
    out = tmp_path / "out"
    common = ["--s3-endpoint", healthy["endpoint"], "--bucket", healthy["bucket"], "--out", str(out)]
    typo = [
        "--bookkeeper-metadata",
        f"zk:{bare}{chroot}/ledger",
        "--pulsar-metadata",
        f"zk:{healthy['hosts']}",
    ]
    msg = one_error(*run(capsys, "audit", *typo, *common), bound=BOUND)
    assert msg == (
        f"zookeeper {bare}: {chroot}/ledger does not exist, so it is not a BookKeeper ledgers root; check the path "
        "in --bookkeeper-metadata (if this is really intended, pass --allow-empty-metadata)"
    )
    wrong = ["--bookkeeper-metadata", f"zk:{bare}{chroot}/ledgers", "--pulsar-metadata", f"zk:{healthy['hosts']}",
             "--pulsar-metadata", f"zk:{bare}/no-such-cluster"]  # fmt: skip
    msg = one_error(*run(capsys, "audit", *wrong, *common), bound=BOUND)
    assert msg == (
        f"zookeeper {bare}/no-such-cluster: chroot /no-such-cluster does not exist; check the path after "
        "host:port in --pulsar-metadata"
    )
    empty = [
        "--bookkeeper-metadata",
        f"zk:{bare}{chroot}/ledgers",
        "--pulsar-metadata",
        f"zk:{healthy['empty']}",
    ]
    msg = one_error(*run(capsys, "audit", *empty, *common), bound=BOUND)
    assert msg.startswith(
        f"zookeeper {healthy['empty']}: no managed ledger found, but bucket {healthy['bucket']} holds objects"
    )
    assert not out.exists()


def test_zookeeper_data_directory_is_checked_at_its_point_in_time(
    healthy, zookeeper, tmp_path, capsys, no_spark
) -> None:  # type: ignore[no-untyped-def]
    """--source zk-snapshot: the chroot and the ledgers root are checked in the replayed tree."""
    data = str(zookeeper.data_dir)
    out = tmp_path / "out"
    snap = ["--source", "zk-snapshot", "--zk-data-dir", data, "--s3-endpoint", healthy["endpoint"],
            "--bucket", healthy["bucket"], "--out", str(out)]  # fmt: skip
    msg = one_error(
        *run(capsys, "audit", *snap, "--zookeeper", healthy["hosts"], "--ledgers-root", "/ledger"),
        bound=BOUND,
    )
    assert msg == (
        f"zk-snapshot {data}: /ledger does not exist, so it is not a BookKeeper ledgers root; check --ledgers-root "
        "and the chroot in --zookeeper (if this is really intended, pass --allow-empty-metadata)"
    )
    msg = one_error(
        *run(capsys, "audit", *snap, "--zookeeper", healthy["bare"] + "/pulsar-typo"), bound=BOUND
    )
    assert msg == (
        f"zk-snapshot {data}: chroot /pulsar-typo does not exist; check the path after host:port in --zookeeper"
    )
    assert not out.exists()
