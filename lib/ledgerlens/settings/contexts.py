"""Cluster contexts: name a Pulsar cluster once, audit it by name everywhere.

A contexts file, shaped after kubectl's and pulsarctl's contexts, names each Pulsar cluster's
stores, credentials (by reference only), thresholds and Spark settings::

    current = "prod-east"

    [contexts.prod-east.pulsar]
    cluster-name = "prod-east"
    admin-url = "https://pulsar-east.example.com:8443"

    [contexts.prod-east.metadata]
    zookeeper = "zk1:2181,zk2:2181/pulsar"

    [contexts.prod-east.s3]
    bucket = "pulsar-offload"
    region = "eu-west-1"

    [contexts.prod-east.auth]
    zookeeper-digest-env = "PROD_EAST_ZK_DIGEST"   # the variable holds user:password

The file is ``$LEDGERLENS_CONFIG`` or ``~/.config/ledgerlens/contexts.toml``; the context is
``--context NAME``, else ``$LEDGERLENS_CONTEXT``, else the file's ``current``. Every setting is
one :class:`Setting` in :data:`SETTINGS` (``ledgerlens.settings.catalog``: key, type, environment
variable, flag, default, secret-or-not) and :func:`resolve` layers them: built-in default < context <
environment < flags (or runbook parameters). The CLI, the runbooks and the library all resolve
through it; :meth:`Settings.audit_request` turns the result into one run's frozen ``AuditRequest``.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledgerlens.errors import ConfigError
from ledgerlens.runtime.preflight import parse_connect_string
from ledgerlens.settings.catalog import BY_KEY, KINDS, SETTINGS, TABLES, Setting
from ledgerlens.settings.config import (
    AuditConfig,
    BookieSource,
    S3Source,
    SecretRef,
    ZooKeeperAuth,
    ZooKeeperSource,
    jaas_sasl_options,
    parse_duration,
    parse_time_ms,
)
from ledgerlens.settings.redact import redact, register_secret
from ledgerlens.settings.request import AuditRequest

if TYPE_CHECKING:
    from ledgerlens.sources.admin import AdminApi
    from ledgerlens.sources.stores import Stores

__all__ = [
    "BY_KEY",
    "CONFIG_ENV",
    "CONTEXT_ENV",
    "KINDS",
    "SETTINGS",
    "TABLES",
    "ContextsFile",
    "Setting",
    "Settings",
    "config_path",
    "load",
    "resolve",
]

CONFIG_ENV = "LEDGERLENS_CONFIG"
CONTEXT_ENV = "LEDGERLENS_CONTEXT"
DEFAULT_PATH = "~/.config/ledgerlens/contexts.toml"


# A context holds references only: these look like credentials and are refused in the file.
_CREDENTIAL_KEY = re.compile(
    r"(?i)(secret|password|passwd|token|credential|private[_.\-]?key|access[_.\-]?key)"
)
_URL_USERINFO = re.compile(r"(?i)^[a-z][a-z0-9+.\-]*://[^/\s@]+@")


# --- the file ------------------------------------------------------------------------------------


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The contexts file: ``$LEDGERLENS_CONFIG`` or ``~/.config/ledgerlens/contexts.toml``."""
    env = os.environ if env is None else env
    if env.get(CONFIG_ENV):
        return Path(env[CONFIG_ENV]).expanduser()
    home = env.get("HOME")
    return Path(home) / DEFAULT_PATH[2:] if home else Path(DEFAULT_PATH).expanduser()


@dataclass(frozen=True)
class ContextsFile:
    """A parsed and validated contexts file: ``contexts[name][key] = (value, line)``."""

    path: Path
    current: str
    contexts: dict[str, dict[str, tuple[Any, int]]]
    warnings: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return list(self.contexts)

    def context(self, name: str) -> dict[str, tuple[Any, int]]:
        try:
            return self.contexts[name]
        except KeyError:
            known = ", ".join(self.contexts) or "none"
            raise ConfigError(f"context {name!r} is not in {self.path} (known: {known})") from None


def _split_key(text: str) -> list[str]:
    """A TOML dotted key or table header -> its parts (bare or quoted)."""
    parts = re.findall(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_\-]+))\s*(?:\.|$)', text)
    return [a or b or c for a, b, c in parts]


def _line_of(lines: list[str], path: list[str]) -> int:
    """1-based line where the key ``path`` (a list of key parts) is defined; 0 when not found."""
    header: list[str] = []
    best = 0
    for n, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith(("'", '"')) else raw.strip()
        m = re.match(r"^\[\[?(.+?)\]\]?$", line)
        if m:
            header = _split_key(m.group(1))
            if header == path:
                return n
            continue
        m = re.match(r"^((?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-.\s])+?)\s*=", line)
        if not m:
            continue
        full = header + _split_key(m.group(1))
        if full == path or full[: len(path)] == path or (len(full) > 2 and path[: len(full)] == full):
            return n
        if not best and full[-1:] == path[-1:]:
            best = n
    return best


def _describe_type(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


# Settings whose values are ZooKeeper connect strings, or store specs that may hold one (KIND:LOCATION).
CONNECT_STRINGS = ("metadata.zookeeper", "metadata.bookkeeper", "metadata.pulsar")
_ZK_USERINFO = re.compile(r"[^\s/@,:]*(:[^\s/@,]*)?@")  # user[:password]@ before a host
ZK_CREDENTIALS_HINT = (
    "give ZooKeeper credentials by reference: auth.zookeeper-digest-env (a variable holding "
    "user:password) or auth.zookeeper-digest-file in a context, or auth.zookeeper-sasl-jaas-file (SASL)"
)


def check_connect_string(key: str, value: str, where: str) -> None:
    """A ZooKeeper connect string (or a store spec holding one) without credentials: ``user:password@``
    is refused with the value redacted; a plain ``--zookeeper`` value must also parse, as the audit
    parses it (``preflight.parse_connect_string``), so ``contexts check`` and ``audit`` agree."""
    kind, sep, location = value.partition(":")
    spec = key != "metadata.zookeeper" and sep and kind in ("zk", "zookeeper", "admin", "zk-snapshot")
    servers = (location if spec else value).split("://", 1)[-1].split("/", 1)[0]
    option = where if where.startswith("--") else f"{where}: {key}"  # a flag names itself
    if "@" in servers:
        shown = _ZK_USERINFO.sub("***@", value)
        raise ConfigError(
            f"{option} {shown!r}: credentials in a ZooKeeper connect string are refused "
            f"(they would be printed and stored); {ZK_CREDENTIALS_HINT}"
        )
    if key == "metadata.zookeeper" and value:
        parse_connect_string(value, option=option)


def _check_value(setting: Setting, value: Any, where: str) -> Any:
    """A file value checked against its setting's kind; returns the value to use."""
    kind = setting.kind
    if setting.key in CONNECT_STRINGS:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                check_connect_string(setting.key, item, where)

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"{where}: {setting.key} must be {expected}, not {_describe_type(value)}")

    if kind in ("str", "duration", "choice"):
        if not isinstance(value, str):
            raise bad("a string")
        if kind == "duration":
            try:
                parse_duration(value)
            except ConfigError as e:
                raise ConfigError(f"{where}: {setting.key}: {e}") from None
        if kind == "choice" and value not in setting.choices:
            raise ConfigError(
                f"{where}: {setting.key} = {value!r}: expected one of {', '.join(setting.choices)}"
            )
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind == "list":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad("an array of strings")
        return list(value)
    if kind == "table":
        if not isinstance(value, dict) or not all(
            isinstance(v, str | int | float | bool) for v in value.values()
        ):
            raise bad("a table of strings")
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
    raise AssertionError(kind)  # pragma: no cover


def _parse_text(setting: Setting, text: str, where: str) -> Any:
    """An environment variable's or flag's text -> the setting's value."""
    kind = setting.kind
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{where}: {setting.key} must be an integer, not {text!r}") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{where}: {setting.key} must be a number, not {text!r}") from None
    if kind == "bool":
        low = text.strip().lower()
        if low not in ("1", "0", "true", "false", "yes", "no"):
            raise ConfigError(f"{where}: {setting.key} must be true or false, not {text!r}")
        return low in ("1", "true", "yes")
    if kind == "list":  # whitespace-separated: ZooKeeper connect strings hold commas
        return text.split()
    if kind == "table":
        out: dict[str, str] = {}
        for item in (p for p in text.split(",") if p.strip()):
            k, sep, v = item.partition("=")
            if not sep:
                raise ConfigError(f"{where}: {setting.key} entries are key=value, not {item.strip()!r}")
            out[k.strip()] = v.strip()
        return out
    return _check_value(setting, text, where)


def _refuse_credentials(setting: Setting, value: Any, where: str) -> None:
    """A context holds references, never credentials: URL userinfo and credential-like conf keys."""
    if isinstance(value, str) and _URL_USERINFO.match(value):
        raise ConfigError(
            f"{where}: {setting.key} carries credentials in the URL; contexts hold references only "
            "(use the auth table: an environment variable's name or a file path)"
        )
    if isinstance(value, dict):
        for k in value:
            if _CREDENTIAL_KEY.search(str(k)):
                raise ConfigError(
                    f"{where}: {setting.key} key {k!r} looks like a credential; contexts hold "
                    "references only (set it in the environment, e.g. spark-defaults or AWS_PROFILE)"
                )


def load(path: str | Path | None = None, *, env: Mapping[str, str] | None = None) -> ContextsFile | None:
    """The contexts file at ``path`` (default :func:`config_path`), validated; None when absent.

    Unknown keys, wrong types and inline credentials are a :class:`ConfigError` naming the file,
    the line and the key. A file readable by others that references credentials gives a warning
    (``ContextsFile.warnings``, also printed to stderr once).
    """
    p = Path(path).expanduser() if path else config_path(env)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        if path or (env if env is not None else os.environ).get(CONFIG_ENV):
            raise ConfigError(f"contexts file {p} does not exist") from None
        return None
    except OSError as e:
        raise ConfigError(f"contexts file {p}: cannot read it ({e.strerror})") from e
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"contexts file {p}: not valid TOML: {e}") from e
    lines = text.splitlines()

    def at(path_parts: list[str]) -> str:
        line = _line_of(lines, path_parts)
        return f"{p}:{line}" if line else str(p)

    for key in data:
        if key not in ("current", "contexts"):
            raise ConfigError(
                f"{at([key])}: unknown key {key!r} (expected 'current' and [contexts.NAME] tables)"
            )
    current = data.get("current", "")
    if not isinstance(current, str):
        raise ConfigError(f"{at(['current'])}: current must be a context name (a string)")
    contexts_data = data.get("contexts", {})
    if not isinstance(contexts_data, dict):
        raise ConfigError(f"{at(['contexts'])}: contexts must be tables [contexts.NAME]")
    contexts: dict[str, dict[str, tuple[Any, int]]] = {}
    for name, body in contexts_data.items():
        if not isinstance(body, dict):
            raise ConfigError(f"{at(['contexts', name])}: context {name!r} must be a table")
        values: dict[str, tuple[Any, int]] = {}
        for table, entries in body.items():
            parts = ["contexts", name, table]
            if table not in TABLES:
                raise ConfigError(
                    f"{at(parts)}: unknown key {table!r} in context {name!r} (tables: {', '.join(TABLES)})"
                )
            if not isinstance(entries, dict):
                raise ConfigError(f"{at(parts)}: {table} must be a table ([contexts.{name}.{table}])")
            for key, value in entries.items():
                full = f"{table}.{key}"
                where_parts = [*parts, key]
                setting = BY_KEY.get(full)
                if setting is None:
                    known = ", ".join(
                        s.key.split(".", 1)[1] for s in SETTINGS if s.key.startswith(table + ".")
                    )
                    raise ConfigError(
                        f"{at(where_parts)}: unknown key {key!r} in [contexts.{name}.{table}] "
                        f"(known: {known})"
                    )
                line = _line_of(lines, where_parts)
                where = f"{p}:{line}" if line else str(p)
                checked = _check_value(setting, value, where)
                _refuse_credentials(setting, checked, where)
                values[full] = (checked, line)
        contexts[name] = values
    if current and current not in contexts:
        raise ConfigError(f"{at(['current'])}: current = {current!r} names no context in the file")
    warnings = _permission_warnings(p, contexts)
    for w in warnings:
        _warn_once(w)
    return ContextsFile(p, current, contexts, warnings)


def _permission_warnings(path: Path, contexts: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    try:
        mode = path.stat().st_mode
    except OSError:
        return ()
    referencing = [n for n, v in contexts.items() if any(BY_KEY[k].key.startswith("auth.") for k in v)]
    if not referencing or not mode & (stat.S_IRWXG | stat.S_IRWXO):
        return ()
    return (
        f"warning: contexts file {path} is accessible by others (mode {stat.S_IMODE(mode):04o}) and "
        f"references credentials (contexts {', '.join(referencing)}): chmod 600 {path}",
    )


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)


# --- resolution ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """A resolved value and the layer it came from (``default``, ``context``, ``env``, ``flag``...)."""

    value: Any
    layer: str
    origin: str  # human: "default", "context prod-east (FILE:LINE)", "env NAME", "flag --x"


@dataclass(frozen=True)
class Settings:
    """Every setting resolved, with its origin; builds the sources and the audit configuration."""

    context: str | None
    path: Path | None
    values: dict[str, Value] = field(default_factory=dict)
    file: ContextsFile | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def get(self, key: str) -> Any:
        return self.values[key].value

    def origin(self, key: str) -> str:
        return self.values[key].origin

    def layer(self, key: str) -> str:
        return self.values[key].layer

    # -- what the library needs

    def _ref(self, env_key: str, file_key: str) -> SecretRef | None:
        env_name, file_name = self[env_key], self[file_key]
        if env_name and file_name:
            raise ConfigError(
                f"{env_key} ({self.origin(env_key)}) and {file_key} ({self.origin(file_key)}): "
                "name one, not both"
            )
        if env_name:
            return SecretRef(env=env_name)
        if file_name:
            return SecretRef(file=str(Path(file_name).expanduser()))
        return None

    def zookeeper_auth(self) -> ZooKeeperAuth | None:
        digest = self._ref("auth.zookeeper-digest-env", "auth.zookeeper-digest-file")
        jaas = self["auth.zookeeper-sasl-jaas-file"]
        if digest is None and not jaas:
            return None
        return ZooKeeperAuth(digest=digest, sasl_jaas_file=str(Path(jaas).expanduser()) if jaas else None)

    def admin_token(self) -> SecretRef | None:
        return self._ref("auth.admin-token-env", "auth.admin-token-file")

    def zookeeper_source(self) -> ZooKeeperSource:
        hosts = self["metadata.zookeeper"]
        if not hosts:
            raise ConfigError(
                "no ZooKeeper connect string: pass --zookeeper HOST:PORT, --sandbox DIR or --context NAME "
                f"(contexts file {self.path or config_path()})"
            )
        return ZooKeeperSource(
            hosts=hosts,
            ledgers_root=self["metadata.ledgers-root"] or "/ledgers",
            managed_ledgers_root=self["metadata.managed-ledgers-root"] or "/managed-ledgers",
            rate_limit=self["metadata.rate-limit"],
            timeout_s=self["metadata.timeout"],
            auth=self.zookeeper_auth(),
        )

    def s3_source(self) -> S3Source | None:
        bucket, endpoint = self["s3.bucket"], self["s3.endpoint"]
        if endpoint and not bucket:
            raise ConfigError("s3 endpoint given without a bucket: name the tiered-storage bucket to audit")
        if not bucket:
            return None
        return S3Source(
            bucket=bucket,
            endpoint_url=endpoint or None,
            region=self["s3.region"] or None,
            profile=self["s3.profile"] or None,
        )

    def audit_config(self, as_of: str = "") -> AuditConfig:
        kwargs: dict[str, Any] = {
            "min_orphan_age_s": parse_duration(self["audit.min-orphan-age"], name="min orphan age"),
            "retention_grace_s": parse_duration(self["audit.retention-grace"], name="retention grace"),
            "incomplete_offload_age_s": parse_duration(self["audit.incomplete-offload-age"]),
            "open_ledger_max_age_s": parse_duration(self["audit.open-ledger-max-age"]),
            "inactive_cursor_age_s": parse_duration(self["audit.inactive-cursor-age"]),
            "default_offload_deletion_lag_ms": parse_duration(self["audit.offload-deletion-lag"]) * 1000,
            "default_retention_minutes": self["audit.default-retention-minutes"],
            "default_retention_mb": self["audit.default-retention-mb"],
        }
        if as_of:
            kwargs["as_of_ms"] = parse_time_ms(as_of)
        if self["audit.deleted-tenants"]:
            kwargs["deleted_tenants"] = tuple(sorted(set(self["audit.deleted-tenants"])))
        return AuditConfig(**kwargs)

    def _stores_without_zookeeper(self) -> bool:
        """The metadata stores are named without ``--zookeeper`` (a snapshot, or both roles)."""
        if self["metadata.zookeeper"]:
            return False
        if self["metadata.source"] == "zk-snapshot" and self["metadata.zk-data-dir"]:
            return True
        if self["metadata.source"] == "admin" and self["metadata.bookkeeper"]:
            return True
        return bool(self["metadata.bookkeeper"] and self["metadata.pulsar"])

    def audit_inputs(self, as_of: str = "") -> tuple[ZooKeeperSource | None, S3Source | None, AuditConfig]:
        """The audit's inputs: ``(ZooKeeperSource | None, S3Source | None, AuditConfig)``; no
        ZooKeeperSource when the stores are named otherwise (see :meth:`stores`)."""
        zk = None if self._stores_without_zookeeper() else self.zookeeper_source()
        return zk, self.s3_source(), self.audit_config(as_of)

    def stores(self) -> Stores:
        """The BookKeeper and Pulsar metadata stores (``ledgerlens.sources.stores``): ``--source``,
        ``--zookeeper``, ``--zk-data-dir``, ``--zk-until``, ``--bookkeeper-metadata``,
        ``--pulsar-metadata``; live stores get the scan settings and credentials of this context."""
        from ledgerlens.sources.stores import Stores  # pulls in kazoo, pyspark: the CLI starts without

        base = ZooKeeperSource(
            hosts=self["metadata.zookeeper"] or "unset",
            ledgers_root=self["metadata.ledgers-root"] or "/ledgers",
            managed_ledgers_root=self["metadata.managed-ledgers-root"] or "/managed-ledgers",
            rate_limit=self["metadata.rate-limit"],
            timeout_s=self["metadata.timeout"],
            auth=self.zookeeper_auth(),
        )
        if not self._stores_without_zookeeper() and self["metadata.source"] != "admin":
            self.zookeeper_source()  # the same error as before when nothing names a store
        return Stores.from_options(
            self["metadata.zookeeper"],
            source=self["metadata.source"] or "zk",
            ledgers_root=self["metadata.ledgers-root"] or "/ledgers",
            bookkeeper=self["metadata.bookkeeper"],
            pulsar=list(self["metadata.pulsar"]),
            zk_data_dir=self["metadata.zk-data-dir"],
            zk_until=self["metadata.zk-until"],
            base=base,
            admin_url=self["pulsar.admin-url"],
            admin=self.admin_api(),
        )

    def audit_request(
        self,
        out_dir: str | Path,
        *,
        as_of: str = "",
        deep_offload_check: bool = False,
        allow_empty_metadata: bool = False,
        read_bookies: bool = False,
    ) -> AuditRequest:
        """The run's request (``ledgerlens.settings.request``), the one way the CLI's ``audit`` and
        ``report`` and the runbooks build it: the stores, bucket and thresholds of these settings
        (checked in this order: ZooKeeper, bucket, thresholds, then the stores), and the run's flags."""
        zk, s3, config = self.audit_inputs(as_of)
        return AuditRequest(
            out_dir=Path(out_dir),
            zk=zk,
            s3=s3,
            config=config,
            stores=self.stores(),
            context=self.public(),
            cluster_name=self["pulsar.cluster-name"] or None,
            deep_offload_check=bool(deep_offload_check),
            allow_empty_metadata=bool(allow_empty_metadata),
            bookie=BookieSource() if read_bookies else None,
            previous=self["audit.previous"],
            history_keep=self["audit.history-keep"],
            fail_on=self["audit.fail-on"],
            spark_master=self["spark.master"],
            spark_conf=dict(self["spark.conf"]),
        )

    def admin_api(self) -> AdminApi:
        """Settings of ``--source admin`` / ``admin:URL`` stores: the token by reference, TLS files."""
        from ledgerlens.sources.admin import AdminApi  # pulls in pyspark: the CLI starts without it

        return AdminApi(
            url=self["pulsar.admin-url"],
            token=self.admin_token(),
            tls_trust_certs_file=self["auth.tls-trust-certs-file"] or None,
            tls_cert_file=self["auth.tls-cert-file"] or None,
            tls_key_file=self["auth.tls-key-file"] or None,
        )

    # -- what people read

    def shown(self, key: str) -> str:
        """The value as it may be printed: references as references, everything redacted."""
        setting, value = BY_KEY[key], self[key]
        if isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in value.items())
        elif isinstance(value, list):
            text = " ".join(value)
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
        if setting.secret and value:
            state = _reference_state(key, str(value))
            text = f"{text} ({state})" if state else text
        return redact(text)

    def public(self) -> dict[str, Any]:
        """The context name, file and every setting (value as shown, origin), for summaries and reports."""
        return {
            "name": self.context or "",
            "file": redact(str(self.path)) if self.path else "",
            "settings": {
                k: {"value": self.shown(k), "origin": redact(v.origin)} for k, v in self.values.items()
            },
        }

    def secrets(self) -> dict[str, str]:
        """Reference -> credential, for every reference that resolves (for leak checks; never print)."""
        out: dict[str, str] = {}
        for key in ("auth.zookeeper-digest-env", "auth.admin-token-env"):
            if self[key] and os.environ.get(self[key], "").strip():
                out[f"env {self[key]}"] = os.environ[self[key]].strip()
        for key in ("auth.zookeeper-digest-file", "auth.admin-token-file", "auth.tls-key-file"):
            if self[key]:
                try:
                    text = Path(self[key]).expanduser().read_text(encoding="utf-8").strip()
                except (OSError, UnicodeDecodeError):
                    continue
                if text:
                    out[f"file {self[key]}"] = text
        if self["auth.zookeeper-sasl-jaas-file"]:
            try:
                password = jaas_sasl_options(self["auth.zookeeper-sasl-jaas-file"]).get("password")
            except ConfigError:
                password = None
            if password:
                out[f"file {self['auth.zookeeper-sasl-jaas-file']}"] = str(password)
        return out


def _reference_state(key: str, value: str) -> str:
    if key.endswith("-env"):
        return "set" if os.environ.get(value, "").strip() else "NOT SET"
    path = Path(value).expanduser()
    if not path.exists():
        return "MISSING"
    return "readable" if os.access(path, os.R_OK) else "NOT READABLE"


def _given(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def resolve(
    context: str | None = None,
    *,
    flags: Mapping[str, Any] | None = None,
    flag_layer: str = "flag",
    env: Mapping[str, str] | None = None,
    config: str | Path | None = None,
) -> Settings:
    """Every setting of :data:`SETTINGS`: built-in default < context < environment < flags.

    Parameters
    ----------
    context
        Context name; None or "" falls back to ``$LEDGERLENS_CONTEXT``, then the file's ``current``.
    flags
        Argparse destinations or runbook parameters (``Setting.flag``) -> value; None, "" and
        empty lists mean "not given".
    flag_layer
        ``flag`` (command line) or ``parameter`` (runbook): how the top layer is named in origins.
    env
        The environment (default ``os.environ``).
    config
        The contexts file (default ``$LEDGERLENS_CONFIG`` or ``~/.config/ledgerlens/contexts.toml``).
    """
    env = os.environ if env is None else env
    flags = flags or {}
    contexts_file = load(config, env=env)
    name = context or env.get(CONTEXT_ENV) or (contexts_file.current if contexts_file else "") or None
    chosen: dict[str, tuple[Any, int]] = {}
    if name:
        if contexts_file is None:
            raise ConfigError(
                f"context {name!r}: no contexts file ({config_path(env)}; set ${CONFIG_ENV} to use another)"
            )
        chosen = contexts_file.context(name)
    values: dict[str, Value] = {}
    for s in SETTINGS:
        v = Value(s.default, "default", "default")
        if s.key in chosen:
            value, line = chosen[s.key]
            where = f"{contexts_file.path}:{line}" if contexts_file and line else str(config)
            v = Value(value, "context", f"context {name} ({where})")
        if s.env and env.get(s.env, "") != "":
            v = Value(_parse_text(s, env[s.env], f"environment variable {s.env}"), "env", f"env {s.env}")
        if s.flag and _given(flags.get(s.flag)):
            raw = flags[s.flag]
            label = s.flag_name if flag_layer == "flag" else f"parameter {s.flag}"
            if s.kind == "duration" and isinstance(raw, int | float) and not isinstance(raw, bool):
                raw = (
                    str(int(raw)) if raw >= 0 else str(raw)
                )  # papermill passes `-p min_orphan_age 90` as 90 (s)
            if isinstance(raw, str):
                value = _parse_text(s, raw, label)
            else:
                value = _check_value(s, list(raw) if isinstance(raw, tuple) else raw, label)
            v = Value(value, flag_layer, f"{flag_layer} {s.flag_name if flag_layer == 'flag' else s.flag}")
        values[s.key] = v
    settings = Settings(name, contexts_file.path if contexts_file else None, values, contexts_file)
    for credential in settings.secrets().values():  # redacted from every output of this process
        register_secret(credential)
        if ":" in credential:
            register_secret(credential.split(":", 1)[1])  # a digest's password on its own
    return settings


# --- what ``ledgerlens contexts list|show`` prints -------------------------------------------------


def format_list(contexts_file: ContextsFile | None, env: Mapping[str, str] | None = None) -> str:
    """One line per context (``*`` marks the one in use), like ``kubectl config get-contexts``."""
    env = os.environ if env is None else env
    if contexts_file is None:
        return f"no contexts file ({config_path(env)}; set ${CONFIG_ENV} to use another)"
    if not contexts_file.contexts:
        return f"{contexts_file.path}: no contexts"
    in_use = env.get(CONTEXT_ENV) or contexts_file.current
    rows = [("", "NAME", "CLUSTER", "METADATA", "BUCKET")]
    for name, values in contexts_file.contexts.items():
        got = {k: str(v[0]) for k, v in values.items()}
        rows.append(
            (
                "*" if name == in_use else "",
                name,
                got.get("pulsar.cluster-name", ""),
                got.get("metadata.zookeeper") or got.get("metadata.source", ""),
                got.get("s3.bucket", ""),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return redact("\n".join([f"# {contexts_file.path}", *lines]))


def format_show(settings: Settings) -> str:
    """Every resolved setting with its origin; references shown as references, all redacted."""
    head = f"context {settings.context or '(none)'}" + (f" from {settings.path}" if settings.path else "")
    width = max(len(k) for k in settings.values)
    shown = {k: settings.shown(k) for k in settings.values}
    vwidth = min(48, max(len(v) for v in shown.values()))
    lines = [head]
    for key, v in settings.values.items():
        lines.append(f"  {key:<{width}}  {shown[key] or '-':<{vwidth}}  {v.origin}")
    return redact("\n".join(lines))
