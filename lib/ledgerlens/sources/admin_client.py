"""The Pulsar admin REST API's client: one URL, its token (read from its reference, sent only in the
``Authorization`` header) and TLS settings, a request pace, retries of 429 and 5xx answers, and the
bounded probe every command runs first (``admin_clusters``: a dead endpoint is one line within
seconds). The inventory source over it is ``sources.admin``.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ledgerlens.errors import ConfigError, SourceError
from ledgerlens.settings.config import SecretRef
from ledgerlens.sources.reach import RateLimiter, tcp_problem, within

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 10.0


def parse_admin_url(text: str) -> str:
    """``http(s)://host:port[/]`` -> the URL without a trailing slash; ConfigError otherwise."""
    url = text.strip().rstrip("/")
    p = urllib.parse.urlparse(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        raise ConfigError(f"admin URL {text!r}: expected http(s)://HOST:PORT (the broker's web service)")
    if p.username or p.password or p.query:
        raise ConfigError(f"admin URL {p.scheme}://{p.hostname}: no credentials or query in the URL")
    return url


class AdminAuthError(SourceError):
    """The admin API refused the request (HTTP 401 / 403): the token or its permissions."""


@dataclass(frozen=True)
class AdminApi:
    """How to reach the admin API: settings and credential references only (no token value)."""

    url: str
    token: SecretRef | None = None
    tls_trust_certs_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    timeout_s: float = 30.0
    retries: int = 5
    backoff_s: float = 0.5
    concurrency: int = 8
    rate_limit: float | None = None  # requests/s across the whole scan


class AdminClient:
    """Blocking JSON GETs with retries; thread-safe (one ``urlopen`` per request)."""

    def __init__(self, api: AdminApi, rate_limit: float | None = None) -> None:
        self.api = api
        self._headers = {"Accept": "application/json", "User-Agent": "ledgerlens"}
        if api.token is not None:
            self._headers["Authorization"] = f"Bearer {api.token.read()}"
        self._ssl: ssl.SSLContext | None = None
        if api.url.startswith("https:"):
            ctx = ssl.create_default_context(cafile=api.tls_trust_certs_file or None)
            if api.tls_cert_file:
                ctx.load_cert_chain(api.tls_cert_file, api.tls_key_file or None)
            self._ssl = ctx
        self._limit = RateLimiter(rate_limit)
        self.requests = 0
        self.retried = 0

    def fetch(self, endpoint: str, timeout_s: float) -> bytes:
        """The body of one ``GET endpoint`` (path and query), no retry: urllib's errors as they are
        (``HTTPError``, ``URLError``, timeouts). ``get`` retries it; the preflight probe bounds it."""
        req = urllib.request.Request(self.api.url + endpoint, headers=self._headers)
        with urllib.request.urlopen(req, timeout=timeout_s, context=self._ssl) as resp:
            return bytes(resp.read())

    def get(self, path: str, params: dict[str, str] | None = None, *, missing_ok: bool = False) -> Any:
        """The parsed JSON answer of ``GET path``; None on 404 when ``missing_ok``."""
        endpoint = path + ("?" + urllib.parse.urlencode(params) if params else "")
        where = f"admin API GET {self.api.url}{endpoint}"
        attempt = 0
        while True:
            self._limit.acquire()
            self.requests += 1
            retry_after: float | None = None
            try:
                body = self.fetch(endpoint, self.api.timeout_s)
                break
            except urllib.error.HTTPError as e:
                if e.code == 404 and missing_ok:
                    return None
                if e.code in (401, 403):
                    raise AdminAuthError(
                        where, f"HTTP {e.code}, not authorized (check auth.admin-token-env/-file)"
                    ) from None
                if e.code not in _RETRY_STATUS:
                    raise SourceError(where, f"HTTP {e.code} {_reason(e)}") from None
                problem = f"HTTP {e.code} {_reason(e)}"
                retry_after = _retry_after(e.headers.get("Retry-After") if e.headers else None)
            except OSError as e:  # URLError, timeouts, refused or reset connections
                reason = getattr(e, "reason", e)
                problem = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
            attempt += 1
            if attempt > self.api.retries:
                raise SourceError(where, f"{problem} after {attempt} attempts") from None
            self.retried += 1
            delay = min(_MAX_BACKOFF_S, self.api.backoff_s * 2 ** (attempt - 1))
            time.sleep(min(_MAX_BACKOFF_S, max(delay, retry_after or 0.0)))
        try:
            return json.loads(body) if body.strip() else None
        except ValueError:
            snippet = body[:40].decode("utf-8", "replace").replace("\n", " ")
            raise SourceError(where, f"the answer is not JSON ({snippet!r}...)") from None


def _reason(e: urllib.error.HTTPError) -> str:
    try:
        body = e.read()[:300].decode("utf-8", "replace")
        reason = json.loads(body).get("reason") if body.strip().startswith("{") else None
    except (OSError, ValueError, AttributeError):
        reason = None
    return str(reason or e.reason or "").replace("\n", " ")[:200]


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _q(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _ns_api(ns: str) -> str:
    """The admin API's path of a namespace resource family: ``/admin/v2/{kind}/t/ns`` for ``t/ns``,
    the v1 API ``/admin/{kind}/t/c/ns`` for a v1 namespace ``t/c/ns`` (v2 refuses those)."""
    parts = ns.split("/")
    quoted = "/".join(_q(p) for p in parts)
    return ("/admin/{kind}/" if len(parts) == 3 else "/admin/v2/{kind}/") + quoted


# the admin API: resolve, connect, answer GET /admin/v2/clusters (the broker answers it from its
# metadata cache, in milliseconds when healthy), so that the command fails within 10 s, start-up
# included, even on a busy machine
ADMIN_TIMEOUT_S = 3.0
ADMIN_PROBE_PATH = "/admin/v2/clusters"
_ADMIN_HINT = "is --admin-url the broker's web service, http(s)://HOST:8080?"


def admin_get(
    client: Any,
    endpoint: str,
    deadline: float,
    *,
    retries: int = 3,
    missing_ok: bool = False,
    budget_s: float | None = None,
) -> Any:
    """The parsed JSON answer of ``GET endpoint`` through ``client`` (an ``AdminClient``: its token,
    read from its reference, and TLS settings) before ``deadline``; 429 and 5xx answers retried
    while time is left (``Retry-After`` honoured). Raises ``SourceError`` naming the URL, the
    request and the problem in one line (``AdminAuthError`` for 401 / 403); a 404 is None with
    ``missing_ok``, else "not a Pulsar admin API". ``budget_s``: the time a silent server is said
    to have had (default: what is left until ``deadline``)."""
    where = f"admin API {client.api.url}"
    budget = budget_s if budget_s is not None else max(0.0, deadline - time.monotonic())
    silent = f"no answer to GET {endpoint} within {budget:.0f} s ({_ADMIN_HINT})"
    attempt = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0.05:
            raise SourceError(where, silent)
        try:
            body = within(lambda t=left: client.fetch(endpoint, t), left + 0.2)
            break
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise AdminAuthError(
                    where,
                    f"GET {endpoint} answered HTTP {e.code}, not authorized "
                    "(check auth.admin-token-env / auth.admin-token-file)",
                ) from None
            if e.code == 404 and missing_ok:
                return None
            if e.code == 404:
                raise SourceError(
                    where,
                    f"GET {endpoint} answered HTTP 404 {_reason(e)}: not a Pulsar admin API ({_ADMIN_HINT})",
                ) from None
            if e.code not in _RETRY_STATUS or attempt >= retries:
                raise SourceError(
                    where, f"GET {endpoint} answered HTTP {e.code} {_reason(e)}".rstrip()
                ) from None
            wait = max(
                client.api.backoff_s * 2**attempt,
                _retry_after(e.headers.get("Retry-After") if e.headers else None) or 0.0,
            )
            if time.monotonic() + wait >= deadline:
                raise SourceError(
                    where, f"GET {endpoint} answered HTTP {e.code} {_reason(e)}".rstrip()
                ) from None
            attempt += 1
            time.sleep(wait)
        except TimeoutError:
            raise SourceError(where, silent) from None
        except http.client.HTTPException as e:  # answers that are not HTTP (a ZooKeeper or binary port)
            raise SourceError(
                where, f"GET {endpoint}: not an HTTP answer ({type(e).__name__}; {_ADMIN_HINT})"
            ) from None
        except OSError as e:  # URLError (refused, reset, TLS), socket timeouts
            reason = getattr(e, "reason", e)
            if isinstance(reason, TimeoutError):
                raise SourceError(where, silent) from None
            if isinstance(reason, ssl.SSLError):
                raise SourceError(
                    where, f"GET {endpoint}: TLS: {reason} (check auth.tls-* settings and the URL's scheme)"
                ) from None
            text = " ".join(str(reason).split()) or type(reason).__name__
            raise SourceError(where, f"GET {endpoint}: {type(reason).__name__}: {text}") from None
    try:
        return json.loads(body) if body.strip() else None
    except ValueError:
        snippet = body[:40].decode("utf-8", "replace").replace("\n", " ")
        raise SourceError(
            where, f"GET {endpoint}: the answer is not JSON ({snippet!r}...): not a Pulsar admin API"
        ) from None


def admin_clusters(api: AdminApi, *, timeout_s: float = ADMIN_TIMEOUT_S) -> list[str]:
    """The clusters of the Pulsar admin API at ``api.url`` (``GET /admin/v2/clusters``), answered
    within ``timeout_s``, else one ``SourceError`` naming the URL and the problem: a name that does
    not resolve, a refused connection, a server that accepts and never answers, one that answers
    but is not a Pulsar admin API (404, not JSON, not a list of names), 401/403. The token is read
    from its reference and only sent in the ``Authorization`` header (``AdminClient``)."""
    where = f"admin API {api.url}"
    url = urlsplit(api.url)
    host = url.hostname or ""
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as e:
        raise ConfigError(f"admin URL {api.url!r}: bad port ({e})") from e
    deadline = time.monotonic() + timeout_s
    problem = tcp_problem(host, port, min(timeout_s, 5.0))
    if problem is not None:
        raise SourceError(where, f"unreachable: {host}:{port} {problem}")
    client = AdminClient(api)
    answer = admin_get(client, ADMIN_PROBE_PATH, deadline, budget_s=timeout_s)
    if not isinstance(answer, list) or not all(isinstance(c, str) for c in answer):
        got = json.dumps(answer)[:60]
        raise SourceError(
            where,
            f"GET {ADMIN_PROBE_PATH}: not a Pulsar admin API answer (expected a JSON list of cluster "
            f"names, got {got}; {_ADMIN_HINT})",
        )
    return [str(c) for c in answer]
