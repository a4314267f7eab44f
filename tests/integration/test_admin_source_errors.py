"""The admin API source against a real local HTTP server that misbehaves: rate limits, server
errors, garbage, silence, refused connections. Every failure is one line naming the endpoint,
within a bounded time; retries recover from transient errors; the token is sent, never shown.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.settings.config import SecretRef
from ledgerlens.sources.admin import AdminApi, AdminClient, AdminSource
from ledgerlens.sources.stores import Stores

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOKEN = "s3cr3t-token-value"


class _Server:
    """A local HTTP server; ``plan[path]`` is a list of answers (status, body, headers) served in
    order, the last one repeated; ``seen`` records (path, Authorization header)."""

    def __init__(self) -> None:
        self.plan: dict[str, list[tuple[int, bytes, dict[str, str]]]] = {}
        self.seen: list[tuple[str, str | None]] = []
        self.hang = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                owner.seen.append((self.path, self.headers.get("Authorization")))
                answers = owner.plan.get(self.path.split("?")[0])
                if answers is None:
                    status, body, headers = 404, b'{"reason":"not found"}', {}
                else:
                    status, body, headers = answers[0] if len(answers) == 1 else answers.pop(0)
                if status == 0:  # never answer (until the test ends)
                    owner.hang.wait(30)
                    return
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.hang.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    try:
        yield s
    finally:
        s.close()


def _api(url: str, **kw: Any) -> AdminApi:
    return AdminApi(url=url, **{"retries": 3, "backoff_s": 0.01, "timeout_s": 2.0, **kw})


def _json(obj: Any) -> tuple[int, bytes, dict[str, str]]:
    return 200, json.dumps(obj).encode(), {"Content-Type": "application/json"}


def test_rate_limited_past_the_retries_fails_naming_the_endpoint(server: _Server) -> None:
    server.plan["/admin/v2/tenants"] = [(429, b"slow down", {"Retry-After": "0"})]
    t0 = time.monotonic()
    with pytest.raises(SourceError) as err:
        AdminClient(_api(server.url)).get("/admin/v2/tenants")
    msg = str(err.value)
    assert f"admin API GET {server.url}/admin/v2/tenants" in msg and "HTTP 429" in msg, msg
    assert "after 4 attempts" in msg and "\n" not in msg, msg
    assert len(server.seen) == 4 and time.monotonic() - t0 < 10


def test_transient_errors_are_retried_with_retry_after(server: _Server) -> None:
    server.plan["/admin/v2/clusters"] = [
        (503, b"", {}),
        (429, b"", {"Retry-After": "1"}),
        _json(["standalone", "global"]),
    ]
    t0 = time.monotonic()
    src = AdminSource(_api(server.url))
    assert src.clusters() == ["standalone"]
    assert len(server.seen) == 3
    assert time.monotonic() - t0 >= 1.0  # Retry-After was honoured


def test_server_error_names_the_broker_reason(server: _Server) -> None:
    server.plan["/admin/v2/tenants"] = [(500, b'{"reason":"metadata store unavailable"}', {})]
    with pytest.raises(SourceError, match=r"/admin/v2/tenants: HTTP 500 metadata store unavailable after"):
        AdminClient(_api(server.url, retries=1)).get("/admin/v2/tenants")


def test_garbage_answer_is_an_error_not_an_empty_inventory(server: _Server) -> None:
    server.plan["/admin/v2/tenants"] = [(200, b"<html>proxy login</html>", {})]
    with pytest.raises(SourceError, match=r"/admin/v2/tenants: the answer is not JSON \('<html>proxy login"):
        AdminClient(_api(server.url)).get("/admin/v2/tenants")


def test_a_silent_server_times_out_within_bounded_time(server: _Server) -> None:
    server.plan["/admin/v2/tenants"] = [(0, b"", {})]
    t0 = time.monotonic()
    with pytest.raises(SourceError, match=r"/admin/v2/tenants: .*after 2 attempts"):
        AdminClient(_api(server.url, retries=1, timeout_s=1.0)).get("/admin/v2/tenants")
    assert time.monotonic() - t0 < 8


def test_refused_connection_is_one_line() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SourceError) as err:
        AdminClient(_api(f"http://127.0.0.1:{port}", retries=1)).get("/admin/v2/clusters")
    assert f"127.0.0.1:{port}/admin/v2/clusters" in str(err.value) and "refused" in str(err.value).lower()


def test_token_is_sent_and_never_shown(server: _Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LL_TEST_ADMIN_TOKEN", TOKEN)
    server.plan["/admin/v2/tenants"] = [(401, b'{"reason":"bad token"}', {})]
    api = _api(server.url, token=SecretRef(env="LL_TEST_ADMIN_TOKEN"))
    assert TOKEN not in repr(api)
    with pytest.raises(SourceError) as err:
        AdminClient(api).get("/admin/v2/tenants")
    assert "HTTP 401, not authorized" in str(err.value) and TOKEN not in str(err.value)
    assert server.seen == [("/admin/v2/tenants", f"Bearer {TOKEN}")]  # no retry of a refusal


def test_a_failing_topic_fails_the_whole_read(server: _Server) -> None:
    """One topic's internal-info keeps failing: the namespace's read raises, no partial rows."""
    ok = {"version": 1, "ledgers": [{"ledgerId": 5, "entries": 3, "size": 30}], "cursors": {}}
    server.plan["/admin/v2/persistent/t/ns"] = [_json(["persistent://t/ns/a", "persistent://t/ns/b b"])]
    server.plan["/admin/v2/persistent/t/ns/a/internal-info"] = [_json(ok)]
    server.plan["/admin/v2/persistent/t/ns/b%20b/internal-info"] = [(502, b"", {})]
    stats: Counter[str] = Counter()
    rows: list[Any] = []
    with pytest.raises(SourceError, match=r"GET .*/admin/v2/persistent/t/ns/b%20b/internal-info: HTTP 502"):
        rows.extend(
            AdminSource(_api(server.url)).read("managed_ledgers", ["t/ns"], rate_limit=None, stats=stats)
        )
    assert stats["retried"] >= 3


def test_a_topic_the_broker_cannot_read_is_one_corrupt_row_not_a_failed_run(server: _Server) -> None:
    """HTTP 500 for one topic only (its managed-ledger or a cursor node does not decode on the
    broker): a managed-ledger error row for it, the others read; most topics failing is an error."""
    ok = {"version": 1, "ledgers": [{"ledgerId": 5, "entries": 3, "size": 30}], "cursors": {}}
    topics = ["persistent://t/c/ns/a", "persistent://t/c/ns/b", "persistent://t/c/ns/x"]
    server.plan["/admin/persistent/t/c/ns"] = [_json(topics)]  # a v1 namespace: the v1 resources
    for name in ("a", "b"):
        server.plan[f"/admin/persistent/t/c/ns/{name}/internal-info"] = [_json(ok)]
    server.plan["/admin/persistent/t/c/ns/x/internal-info"] = [(500, b"<html>Request failed.</html>", {})]
    stats: Counter[str] = Counter()
    rows = list(
        AdminSource(_api(server.url)).read("managed_ledgers", ["t/c/ns"], rate_limit=None, stats=stats)
    )
    mls = {r["managed_ledger"]: r for t, r in rows if t == "managed_ledgers"}
    assert set(mls) == {"t/c/ns/persistent/a", "t/c/ns/persistent/b", "t/c/ns/persistent/x"}
    assert mls["t/c/ns/persistent/a"].get("error") is None
    bad = mls["t/c/ns/persistent/x"]
    assert bad["path"] == "/managed-ledgers/t/c/ns/persistent/x"
    assert "cannot read this topic's managed-ledger or cursor metadata" in bad["error"]
    assert "/admin/persistent/t/c/ns/x/internal-info: HTTP 500" in bad["error"]
    assert [r["ledger_id"] for t, r in rows if t == "ml_ledgers"] == [5, 5]
    assert stats["unreadable"] == 1

    for name in ("a", "b"):  # now every topic fails: the broker is failing, not three topics
        server.plan[f"/admin/persistent/t/c/ns/{name}/internal-info"] = [(500, b"", {})]
    with pytest.raises(
        SourceError, match=r"/admin/persistent/t/c/ns: the broker answers HTTP 500 for 3 of 3"
    ):
        list(AdminSource(_api(server.url)).read("managed_ledgers", ["t/c/ns"], rate_limit=None, stats=stats))


def test_admin_store_options() -> None:
    with pytest.raises(ConfigError, match="--admin-url"):
        Stores.from_options("127.0.0.1:2181", source="admin")
    with pytest.raises(ConfigError, match="no BookKeeper ledger metadata"):
        Stores.from_options(bookkeeper="admin:http://h:8080", pulsar=["zk:h:2181"])
    with pytest.raises(ConfigError, match="expected http"):
        Stores.from_options("h:2181", source="admin", admin_url="h:8080")
    st = Stores.from_options("h:2181", source="admin", admin_url="http://h:8080/")
    assert st.describe()["pulsar"][0]["kind"] == "admin"
    assert st.describe()["pulsar"][0]["location"] == "admin:http://h:8080"
    assert st.describe()["bookkeeper"]["location"] == "zk:h:2181"
    assert st.live_zookeeper() is not None  # re-verification reads the API again
    # BookKeeper's ledgers from --zookeeper: its chroot is the cluster's
    st = Stores.from_options("h:2181/cluster-a", source="admin", admin_url="http://h:8080")
    assert st.describe()["bookkeeper"]["location"] == "zk:h:2181/cluster-a"


@pytest.mark.spark
def test_an_error_in_a_spark_task_is_one_line_naming_the_endpoint(
    server: _Server, spark: Any, zookeeper: Any, zk_client: Any, fresh_root: str, tmp_path: Any
) -> None:
    """Planning succeeds, then a task's read is rate-limited past its retries: the collection
    raises the task's SourceError (one line, the endpoint), not Spark's wrapped traceback."""
    from ledgerlens.inventory.collect import collect_inventory
    from ledgerlens.settings.config import ZooKeeperSource
    from ledgerlens.sources.base import BOOKKEEPER_STAGES
    from ledgerlens.sources.zookeeper import LiveZooKeeper

    zk_client.ensure_path(f"{fresh_root}/ledgers/available")
    server.plan["/admin/v2/tenants"] = [_json(["t"])]
    server.plan["/admin/v2/namespaces/t"] = [_json(["t/a", "t/b"])]
    server.plan["/admin/v2/namespaces/t/a"] = [_json({})]
    server.plan["/admin/v2/namespaces/t/b"] = [_json({})]
    server.plan["/admin/v2/clusters"] = [_json(["standalone"])]
    server.plan["/admin/v2/persistent/t/a"] = [_json([])]
    server.plan["/admin/v2/persistent/t/b"] = [(429, b"", {})]
    bk = LiveZooKeeper(
        ZooKeeperSource(hosts=zookeeper.hosts, ledgers_root=f"{fresh_root}/ledgers"), BOOKKEEPER_STAGES
    )
    t0 = time.monotonic()
    with pytest.raises(SourceError) as err:
        collect_inventory(spark, [bk, AdminSource(_api(server.url))], None, str(tmp_path), progress=False)
    msg = str(err.value)
    assert msg.startswith(
        f"admin API GET {server.url}/admin/v2/persistent/t/b?includeSystemTopic=true: HTTP 429"
    )
    assert "\n" not in msg and "Traceback" not in msg and time.monotonic() - t0 < 120
