# ruff: noqa: E501  (exact one-line error messages are asserted whole)
"""``ledgerlens audit --source admin``: the admin URL is probed before Spark starts (issue 42).

The command as an operator runs it (a subprocess), BookKeeper's ledgers in a real ZooKeeper, the
admin URL pointing at: nothing listening, a socket that accepts and never answers, a host name
that does not resolve, an HTTP server answering 404 for everything, one answering HTML, one
refusing the token. Each ends in exactly one ``ledgerlens audit: error: ...`` line naming the URL,
exit status 2, well within 10 s, no traceback, the token never shown. Then the plausibility gate:
an admin API that lists topics is a cluster next to a bucket holding objects; one that lists none
is refused as a metadata store without managed ledgers would be.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.audit.gates import ImplausibleInputError
from ledgerlens.errors import SourceError
from ledgerlens.settings.config import S3Source
from ledgerlens.sources.stores import Stores

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LEDGERLENS = str(Path(sys.executable).with_name("ledgerlens"))
TOKEN = "s3cr3t-admin-token-42"
LIMIT_S = 10.0


class _Http:
    """A local HTTP server: ``answers[path]`` = (status, body) for GETs, ``default`` otherwise;
    ``seen`` records (path, Authorization header)."""

    def __init__(self, default: tuple[int, bytes] = (404, b"<html>Not Found</html>")) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {}
        self.default = default
        self.seen: list[tuple[str, str | None]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.seen.append((self.path, self.headers.get("Authorization")))
                status, body = owner.answers.get(self.path, owner.default)
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if body[:1] in b"[{" else "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *a: None  # type: ignore[method-assign]  # a client gone: no traceback
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def json(self, path: str, obj: Any) -> None:
        self.answers[path] = (200, json.dumps(obj).encode())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def http() -> Iterator[_Http]:
    server = _Http()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def silent() -> Iterator[str]:
    """A socket that accepts every connection and never answers (until the test ends)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        thread.join(2)
        for conn in held:
            conn.close()
        listener.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def bk_hosts(zookeeper: Any, zk_client: Any, fresh_root: str) -> str:
    """A chroot whose ledgers root looks like BookKeeper's (``LAYOUT``, ``available``): the
    ZooKeeper checks pass, so what fails is the admin URL."""
    zk_client.create(
        f"{fresh_root}/ledgers/LAYOUT",
        b"2\norg.apache.bookkeeper.meta.HierarchicalLedgerManagerFactory:1\n",
        makepath=True,
    )
    zk_client.ensure_path(f"{fresh_root}/ledgers/available")
    return f"{zookeeper.hosts}{fresh_root}"


def _audit(
    url: str, bk_hosts: str, out: Path, *extra: str, env: dict[str, str] | None = None, timeout: float = 120
) -> tuple[int, list[str], str, float]:
    """``ledgerlens audit --source admin --admin-url URL``: (exit status, stderr lines, stdout, seconds)."""
    argv = [LEDGERLENS, "audit", "--source", "admin", "--admin-url", url, "--zookeeper", bk_hosts]
    argv += ["--out", str(out), *extra]
    t0 = time.monotonic()
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
    elapsed = time.monotonic() - t0
    return proc.returncode, proc.stderr.splitlines(), proc.stdout, elapsed


def _one_error_line(code: int, err: list[str], out: str, elapsed: float, url: str) -> str:
    report = f"exit {code} after {elapsed:.1f}s\nstderr: {err}\nstdout: {out!r}"
    assert code == 2, report
    assert elapsed < LIMIT_S, report
    assert len(err) == 1, report
    line = err[0]
    assert line.startswith("ledgerlens audit: error: admin API "), report
    assert url in line and "Traceback" not in line, report
    return line


@pytest.mark.parametrize(
    ("case", "problem"),
    [
        ("refused", "connection refused"),
        ("silent", "no answer to GET /admin/v2/clusters within"),
        ("unresolvable", "does not resolve"),
        ("404", "GET /admin/v2/clusters answered HTTP 404"),
    ],
)
def test_a_bad_admin_url_is_one_line_before_spark(
    case: str, problem: str, bk_hosts: str, http: _Http, silent: str, tmp_path: Path
) -> None:
    url = {
        "refused": f"http://127.0.0.1:{_closed_port()}",
        "silent": silent,
        "unresolvable": "http://no-such-host.invalid:8080",
        "404": http.url,
    }[case]
    code, err, out, elapsed = _audit(url, bk_hosts, tmp_path / "out")
    line = _one_error_line(code, err, out, elapsed, url)
    print(f"{case}: {elapsed:.2f}s: {line}")
    assert problem in line, line
    if case == "404":
        assert "not a Pulsar admin API" in line and http.seen[0][0] == "/admin/v2/clusters", line
    assert not (tmp_path / "out" / "findings.parquet").exists()


def test_an_answer_that_is_not_the_admin_api_is_one_line(bk_hosts: str, http: _Http, tmp_path: Path) -> None:
    """A proxy's login page (200, HTML) and a server answering JSON that is no list of clusters."""
    http.default = (200, b"<html>proxy login</html>")
    code, err, out, elapsed = _audit(http.url, bk_hosts, tmp_path / "out")
    line = _one_error_line(code, err, out, elapsed, http.url)
    assert "GET /admin/v2/clusters: the answer is not JSON ('<html>proxy login" in line, line
    http.default = (200, b'{"status": "UP"}')
    code, err, out, elapsed = _audit(http.url, bk_hosts, tmp_path / "out")
    line = _one_error_line(code, err, out, elapsed, http.url)
    assert "not a Pulsar admin API answer (expected a JSON list of cluster names" in line, line


def test_a_refused_token_is_one_line_and_never_shown(bk_hosts: str, http: _Http, tmp_path: Path) -> None:
    http.default = (401, b'{"reason":"Authentication required"}')
    env = {"LEDGERLENS_ADMIN_TOKEN_ENV": "LL_TEST_ADMIN_TOKEN", "LL_TEST_ADMIN_TOKEN": TOKEN}
    code, err, out, elapsed = _audit(http.url, bk_hosts, tmp_path / "out", env=env)
    line = _one_error_line(code, err, out, elapsed, http.url)
    assert "GET /admin/v2/clusters answered HTTP 401, not authorized (check auth.admin-token-env" in line
    assert TOKEN not in line + out
    assert http.seen == [("/admin/v2/clusters", f"Bearer {TOKEN}")]  # by reference, sent once, in the header


def test_the_admin_source_fails_fast_without_the_preflight_too(http: _Http, silent: str) -> None:
    """Library use (notebooks, ``pipeline.run``): the source's own check and its cluster lookup are
    the same bounded probe, not minutes of 30 s timeouts and retries."""
    from ledgerlens.sources.admin import AdminApi, AdminSource

    for url in (silent, http.url, f"http://127.0.0.1:{_closed_port()}"):
        src = AdminSource(AdminApi(url=url))
        t0 = time.monotonic()
        with pytest.raises(SourceError, match=f"^admin API {url}: "):
            src.check()
        with pytest.raises(SourceError, match=f"^admin API {url}: "):
            src.clusters()
        assert time.monotonic() - t0 < 2 * LIMIT_S


# -- the plausibility gate -----------------------------------------------------------------------


def _pulsar_api(http: _Http, topics: dict[str, list[str]]) -> None:
    """The listings of an admin API holding ``topics`` per namespace."""
    tenants = sorted({ns.split("/")[0] for ns in topics})
    http.json("/admin/v2/clusters", ["standalone"])
    http.json("/admin/v2/tenants", tenants)
    for t in tenants:
        http.json(f"/admin/v2/namespaces/{t}", sorted(ns for ns in topics if ns.startswith(t + "/")))
    for ns, names in topics.items():
        http.json(f"/admin/v2/persistent/{ns}?includeSystemTopic=true", names)


@pytest.fixture
def full_bucket(s3_server: Any, bucket: str) -> S3Source:
    import boto3

    s3 = boto3.client("s3", endpoint_url=s3_server.endpoint_url, region_name="us-east-1")
    s3.put_object(Bucket=bucket, Key="3f2c9c1e-0d1b-4f7e-9a55-1c0a5e0f6a10-ledger-12", Body=b"x")
    return S3Source(bucket=bucket, endpoint_url=s3_server.endpoint_url, region="us-east-1")


def test_the_gate_counts_what_the_admin_api_sees(
    bk_hosts: str, http: _Http, full_bucket: S3Source, tmp_path: Path
) -> None:
    """A bucket holding objects next to an admin API with topics: not refused; the counts are
    what the admin source would read (tenants, namespaces, topics with system topics, v1 names)."""
    from ledgerlens.runtime.preflight import preflight

    _pulsar_api(
        http,
        {
            "public/default": [
                "persistent://public/default/orders",
                "persistent://public/default/orders-partition-0",
            ],
            "pulsar/system": ["persistent://pulsar/system/__change_events"],
            "empty/ns": [],
        },
    )
    http.json("/admin/persistent/old/c1/ns?includeSystemTopic=true", ["persistent://old/c1/ns/legacy"])
    http.json("/admin/v2/tenants", ["empty", "old", "public", "pulsar"])
    http.json("/admin/v2/namespaces/old", ["old/c1/ns"])
    stores = Stores.from_options(bk_hosts, source="admin", admin_url=http.url)
    seen = preflight(None, full_bucket, out=tmp_path / "out", stores=stores)
    admin = next(s for s in seen["stores"] if s["where"] == f"admin API {http.url}")
    assert admin["clusters"] == ["standalone"]
    assert (admin["tenants"], admin["namespaces"], admin["topics"]) == (4, 4, 4), admin
    assert admin["managed_ledger_tenants"] == 3 and admin["complete"], admin

    # no topic anywhere, a bucket full of offloaded objects: refused, naming the admin API
    _pulsar_api(http, {"public/default": []})
    with pytest.raises(ImplausibleInputError) as err:
        preflight(None, full_bucket, out=tmp_path / "out", stores=stores)
    assert str(err.value).startswith(
        f"admin API {http.url}: no managed ledger found, but bucket {full_bucket.bucket} holds objects"
    ), err.value
    seen = preflight(None, full_bucket, out=tmp_path / "out", stores=stores, allow_empty_metadata=True)
    assert next(s for s in seen["stores"] if "tenants" in s)["topics"] == 0


def test_the_gate_refuses_in_one_line_through_the_command(
    bk_hosts: str, http: _Http, full_bucket: S3Source, s3_server: Any, tmp_path: Path
) -> None:
    _pulsar_api(http, {"public/default": []})
    code, err, out, elapsed = _audit(
        http.url,
        bk_hosts,
        tmp_path / "out",
        "--bucket",
        full_bucket.bucket,
        "--s3-endpoint",
        s3_server.endpoint_url,
    )
    line = _one_error_line(code, err, out, elapsed, http.url)
    assert "no managed ledger found, but bucket" in line and "--allow-empty-metadata" in line, line


def test_a_slow_listing_leaves_the_gate_to_the_collection(
    bk_hosts: str, full_bucket: S3Source, tmp_path: Path
) -> None:
    """Listings that do not answer within the count's time: not an error before Spark (the
    collection reads them with its own timeouts and retries), and no refusal on a guess."""
    from ledgerlens.runtime import preflight as pf

    server = _Http()
    hang = threading.Event()
    _pulsar_api(server, {"public/default": ["persistent://public/default/x"]})
    original = server.httpd.RequestHandlerClass.do_GET  # type: ignore[attr-defined]

    def slow(handler: Any) -> None:
        if handler.path.startswith("/admin/v2/namespaces/"):
            hang.wait(5)
        original(handler)

    server.httpd.RequestHandlerClass.do_GET = slow  # type: ignore[attr-defined]
    saved = pf.ADMIN_COUNT_S
    pf.ADMIN_COUNT_S = 1.0
    try:
        stores = Stores.from_options(bk_hosts, source="admin", admin_url=server.url)
        t0 = time.monotonic()
        seen = pf.preflight(None, full_bucket, out=tmp_path / "out", stores=stores)
        assert time.monotonic() - t0 < 5
        admin = next(s for s in seen["stores"] if "tenants" in s)
        assert admin["complete"] is False and admin["managed_ledger_tenants"] is None, admin
    finally:
        pf.ADMIN_COUNT_S = saved
        hang.set()
        server.close()


# -- progress ------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_collection_through_the_api_shows_progress(bk_hosts: str, http: _Http, tmp_path: Path) -> None:
    """A healthy API: the run's one progress display goes through every collection stage the
    admin source reads (one line each when stderr is not a terminal), then audit, re-verification
    (through the API) and write; nothing else on stderr (no Spark, py4j, urllib or kazoo output);
    the summary line last."""
    info = {"version": 1, "ledgers": [{"ledgerId": 5, "entries": 3, "size": 30}], "cursors": {}}
    _pulsar_api(http, {"public/default": ["persistent://public/default/t1"]})
    http.json("/admin/v2/namespaces/public/default", {})
    http.json("/admin/v2/persistent/public/default/t1/internal-info", info)
    code, err, out, elapsed = _audit(
        http.url, bk_hosts, tmp_path / "out", "--spark-master", "local[1]", timeout=600
    )
    report = f"exit {code} after {elapsed:.1f}s\nstderr:\n" + "\n".join(err) + f"\nstdout:\n{out}"
    assert code == 0, report
    assert err[0].startswith("ledgerlens audit: started "), report  # when, on the wall clock (UTC)
    said = [line.split("] ", 1)[1].split(" (")[0] for line in err[1:] if line.startswith("[")]
    assert len(said) == len(err) - 1, report  # progress lines only
    stages = [s.split()[-1] for s in said if s.startswith("collect ") and "/" in s.split()[1]]
    assert sorted(stages) == ["bk_ledgers", "managed_ledgers", "namespace_policies", "schema_ledgers"], report
    for phase in ("collect", "audit", "re-verify", "write"):
        assert any(s.startswith(f"{phase} done in") for s in said), report
    assert err[-1].startswith("[100%"), report
    last = out.splitlines()[-1]
    assert last.startswith("ledgerlens: 1 critical") and "missing_ledger ledger 5" in last, report
    assert ("/admin/v2/persistent/public/default/t1/internal-info", None) in http.seen
