"""One redaction function for everything ledgerlens writes or prints.

``redact(text)`` replaces credentials with ``***``; every output goes through it: error lines,
log lines, ``summary.json``, findings evidence, executed notebooks and HTML reports.

What it removes:

- userinfo in URLs: ``https://KEY:SECRET@host`` -> ``https://***@host`` (any scheme);
- values of secret-looking keys in ``key=value``, ``"key": "value"`` (JSON, Python reprs),
  ``key: value`` and HTTP header forms (``Authorization: ...``, ``X-Amz-Security-Token: ...``);
  in notebooks (``redact_notebook``) also the string values of secret-looking keys of their data
  (``metadata.papermill.parameters``, recorded JSON), where no text surrounds the value;
- bearer tokens and JSON web tokens (Pulsar token authentication);
- ZooKeeper digest credentials: ``digest:user:password`` / ``digest user:password`` -> ``user:***``;
- the value of every secret-looking environment variable (``AWS_SECRET_ACCESS_KEY``,
  ``AWS_SESSION_TOKEN``, ``*SECRET*``, ``*TOKEN*``, ``*PASSWORD*``, ...) wherever it appears.

Identifiers are never touched by the callers: redaction applies to messages and evidence, not to
ledger ids, managed-ledger names or object keys (a deletion plan must name the real object).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

# Environment variables whose values are secrets (by exact name, or by a word in the name).
_SECRET_ENV_NAMES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
_SECRET_ENV_WORDS = (
    "SECRET",
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "DIGEST",
    "AUTH_PARAMS",
    "PRIVATE_KEY",
    "API_KEY",
)
MIN_SECRET_LEN = 6  # shorter values ("1", "true") would match everywhere and reveal nothing

# Words that make a key secret in key=value / "key": "value" forms (case-insensitive, inside a
# longer key too: aws_secret_access_key, X-Amz-Credential, authParams, client_secret, ...).
_KEY_WORDS = (
    r"password|passwd|passphrase|pwd|secret|token|credential|signature|authparams|auth[_\-]?params"
    r"|api[_\-]?key|access[_\-]?key|secret[_\-]?key|private[_\-]?key|session[_\-]?key|authorization"
)
# Keys that are secret in the colon form (``key: value``); plain "token:" or "secret:" in prose
# stays readable, these names do not occur in prose.
_COLON_KEYS = (
    r"[\w.\-]*(?:password|passwd|passphrase|secret[_\-]?access[_\-]?key|secret[_\-]?key"
    r"|session[_\-]?token|auth[_\-]?token|access[_\-]?token|api[_\-]?key|private[_\-]?key"
    r"|client[_\-]?secret|auth[_\-]?params)"
)
_HEADERS = r"proxy-authorization|authorization|x-amz-security-token|x-api-key|x-auth-token|set-cookie|cookie"
_VALUE = r"[^\s&;,'\"<>()\[\]{}]+"

# (pattern, replacement) in order. Patterns and replacements use only syntax that Python's ``re``
# and Java's regex share (``\N`` group references are rewritten for Java by ``java_rules``).
RULES: tuple[tuple[str, str], ...] = (
    # URL userinfo: scheme://anything-without-slash-or-space@host
    (r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@'\"<>]+@", r"\1" + MASK + "@"),
    # HTTP headers: the rest of the line (a header value may hold spaces: "Bearer x", "AWS4-HMAC ...")
    (r"(?i)\b(" + _HEADERS + r")(\s*:\s*)(?![\"'])[^\r\n\"',}]+", r"\1\2" + MASK),
    # "key": "value" and 'key': 'value' (JSON, Python reprs); key may be a header name
    (
        r"(?i)(\"[\w.\-]*(?:" + _KEY_WORDS + "|" + _HEADERS + r")[\w.\-]*\"\s*:\s*)\"(?:[^\"\\]|\\.)*\"",
        r"\1" + '"' + MASK + '"',
    ),
    (
        r"(?i)('[\w.\-]*(?:" + _KEY_WORDS + "|" + _HEADERS + r")[\w.\-]*'\s*:\s*)'(?:[^'\\]|\\.)*'",
        r"\1" + "'" + MASK + "'",
    ),
    # key=value, key="value", key='value' (query strings, config lines, Java properties, JAAS)
    (
        r"(?i)\b([\w.\-]*(?:" + _KEY_WORDS + r")[\w.\-]*)(\s*=\s*)(?:\"[^\"]*\"|'[^']*'|" + _VALUE + ")",
        r"\1\2" + MASK,
    ),
    # key: value (YAML, properties files) for unmistakably secret key names
    (r"(?i)\b(" + _COLON_KEYS + r")(\s*:\s*)(?![\"'])" + _VALUE, r"\1\2" + MASK),
    # bearer tokens anywhere
    (r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/\-]+=*", r"\1" + MASK),
    # JSON web tokens (header.payload.signature, base64url)
    (r"\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*", MASK),
    # ZooKeeper digest credentials: digest:user:password, digest user:password, "digest", "user:pw"
    (r"(?i)\b(digest\b[\s:=,'\"]*)([^\s:'\",;]+):[^\s'\",;)}\]]+", r"\1\2:" + MASK),
)
_COMPILED = tuple((re.compile(p), r) for p, r in RULES)
# A key (a notebook parameter's name, a JSON field) whose value is a credential: the same names as
# the ``"key": "value"`` rule above.
_SECRET_KEY = re.compile(r"(?i)[\w.\-]*(?:" + _KEY_WORDS + "|" + _HEADERS + r")[\w.\-]*")
# Rules safe inside program text (inline JavaScript such as plotly.js): ``key=value`` and
# ``key: value`` would rewrite assignments like ``x.withCredentials=...`` and break the script.
_CODE_SAFE = tuple(c for i, c in enumerate(_COMPILED) if i not in (4, 5))
_SCRIPT = re.compile(r"(<script\b[^>]*>)(.*?)(</script\s*>)", re.I | re.S)


def secret_values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Name -> value of every secret-looking environment variable worth looking for."""
    env = os.environ if env is None else env
    return {
        k: v
        for k, v in env.items()
        if (k.upper() in _SECRET_ENV_NAMES or any(word in k.upper() for word in _SECRET_ENV_WORDS))
        and v
        and len(v.strip()) >= MIN_SECRET_LEN
    }


_REGISTERED: set[str] = set()


def register_secret(value: str) -> None:
    """Redact ``value`` too, wherever it appears in this process's outputs.

    For credentials read through a reference whose name does not look secret (a context's
    ZooKeeper digest variable, token file, JAAS password: ``ledgerlens.settings.contexts``).
    """
    value = value.strip()
    if len(value) >= MIN_SECRET_LEN:
        _REGISTERED.add(value)


def literal_secrets(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The values ``redact`` removes wherever they appear: those of the secret environment variables
    (``secret_values``) and the registered ones (``register_secret``)."""
    return frozenset(secret_values(env).values()) | frozenset(_REGISTERED)


def secret_key(name: object) -> bool:
    """True for a key whose value is a credential (``s3_secret_key``, ``adminToken``, ``Authorization``):
    the key names whose values the ``"key": "value"`` rule masks in text."""
    return isinstance(name, str) and _SECRET_KEY.fullmatch(name) is not None


def leaked_names(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """Names (never values) of the secret environment variables whose value appears in ``text``."""
    return sorted(k for k, v in secret_values(env).items() if v in text)


def redact(text: str, env: Mapping[str, str] | None = None, *, code: bool = False) -> str:
    """``text`` with every credential replaced by ``***`` (see the module docstring).

    ``env`` defaults to ``os.environ`` (whose secret values are removed literally). ``code=True``
    for program text (inline JavaScript): the ``key=value`` forms are left alone there. Idempotent.
    """
    if not text:
        return text
    for value in sorted(literal_secrets(env), key=len, reverse=True):
        text = text.replace(value, MASK)
    for pattern, replacement in _CODE_SAFE if code else _COMPILED:
        text = pattern.sub(replacement, text)
    return text


def redact_html(text: str, env: Mapping[str, str] | None = None) -> str:
    """An HTML document or fragment redacted; inline ``<script>`` bodies as program text."""
    out: list[str] = []
    last = 0
    for m in _SCRIPT.finditer(text):
        out.append(redact(text[last : m.start()], env))
        out.append(redact(m.group(1), env) + redact(m.group(2), env, code=True) + m.group(3))
        last = m.end()
    out.append(redact(text[last:], env))
    return "".join(out)


def _is_json_mime(mime: str) -> bool:
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))


def _redact_value(value: Any, mime: str, env: Mapping[str, str] | None) -> Any:
    if _is_json_mime(mime):  # data, not text split into lines: a list of strings stays a list
        return redact_obj(value, env, by_key=True)
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and value:
        joined = "".join(value)
        return _redact_value(joined, mime, env).splitlines(keepends=True)
    if isinstance(value, str):
        if mime == "text/html":
            return redact_html(value, env)
        if mime in ("application/javascript", "text/javascript"):
            return redact(value, env, code=True)
        return redact(value, env)
    if isinstance(value, Mapping):
        return {
            (redact(k, env) if isinstance(k, str) else k): (
                MASK
                if isinstance(v, str) and v and secret_key(k)
                else _redact_value(v, str(k) if "/" in str(k) else mime, env)
            )
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(v, mime, env) for v in value]
    return value


def redact_notebook(nb: Mapping[str, Any], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A notebook (its JSON as dicts) with every source, output and metadata string redacted.

    Multi-line strings are redacted whole; ``text/html`` outputs keep their inline scripts working.
    A string value under a secret-looking key (``secret_key``: papermill's record of the parameters,
    ``metadata.papermill.parameters``, recorded JSON) is masked whole.
    """
    return dict(_redact_value(nb, "", env))


def redact_nullable(text: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """``redact`` for a nullable column value (a Spark UDF over findings evidence)."""
    return None if text is None else redact(text, env)


def redact_obj(obj: Any, env: Mapping[str, str] | None = None, *, by_key: bool = False) -> Any:
    """``obj`` (JSON-like: dicts, lists, strings) with every string, key included, redacted.

    ``by_key=True``: a string value under a secret-looking key (``secret_key``) is masked whole too.
    """
    if isinstance(obj, str):
        return redact(obj, env)
    if isinstance(obj, Mapping):
        return {
            (redact(k, env) if isinstance(k, str) else k): (
                MASK
                if by_key and isinstance(v, str) and v and secret_key(k)
                else redact_obj(v, env, by_key=by_key)
            )
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_obj(v, env, by_key=by_key) for v in obj]
    return obj


def redact_exception(error: BaseException) -> str:
    """The message of ``error`` (its class name when empty), redacted, on one line."""
    text = " ".join(str(error).split()) or type(error).__name__
    return redact(text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's final message (arguments included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave the record to logging's own handling
            return True
        redacted = redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        return True


_FILTER = RedactingFilter()


def redact_logging(logger: logging.Logger | None = None) -> None:
    """Attach the redacting filter to every handler of ``logger`` (root by default); idempotent.

    Call after logging is configured; handlers added later are not covered.
    """
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
