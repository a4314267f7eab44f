"""A sandbox as audit inputs, the same way for the CLI's ``--sandbox DIR`` and the runbooks' ``sandbox``.

``sandbox_flags(flags, DIR)`` fills every input left empty from the sandbox: its ZooKeeper, S3
endpoint and bucket from ``DIR/state.json``, its clock (a generated cluster's ``now_ms``) and
thresholds (a planted Pulsar sandbox's ``max_age_s``) from ``DIR/ground_truth.json``, its cluster
name, and dummy S3 credentials in this process's environment (the sandbox's S3 server accepts any;
configured credentials are never replaced). The filled flags then go through
``ledgerlens.settings.contexts.resolve`` like any other flags or runbook parameters.

``deletion_inputs(params, DIR)`` does the same for the approval runbook's files: the deletion plan
``DIR/plan.json`` (``ledgerlens plan --out DIR/plan.json``), the journal
``DIR/deletion-journal.jsonl`` and the sandbox broker's web service.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledgerlens.errors import ConfigError

SANDBOX_AWS_DUMMY = "ledgerlens-sandbox-dummy-credential"
# The deletion flow's files: in a sandbox directory, else in the working directory.
PLAN_FILE = "plan.json"
JOURNAL_FILE = "deletion-journal.jsonl"
# The audit's thresholds: each a flag of audit and report, a runbook parameter, a context key
# (``audit.<name with dashes>``) and an environment variable (``LEDGERLENS_<NAME>``).
THRESHOLDS = (
    "min_orphan_age",
    "retention_grace",
    "incomplete_offload_age",
    "open_ledger_max_age",
    "inactive_cursor_age",
    "offload_deletion_lag",
    "default_retention_minutes",
    "default_retention_mb",
)


@dataclass(frozen=True)
class SandboxSettings:
    """What a sandbox directory says about auditing it (empty: not prescribed)."""

    workdir: str
    zookeeper: str
    s3_endpoint: str
    bucket: str
    as_of: str = ""  # the generated cluster's clock (epoch ms); "" for a real-time cluster
    min_orphan_age: str = ""
    retention_grace: str = ""
    incomplete_offload_age: str = ""
    cluster_name: str = ""
    admin_url: str = ""  # a real Pulsar sandbox's web service (``--source admin``)

    def flags(self) -> dict[str, str]:
        """As flags / runbook parameters (``Setting.flag`` names), empty values left out."""
        names = (
            "zookeeper",
            "s3_endpoint",
            "bucket",
            "as_of",
            "min_orphan_age",
            "retention_grace",
            "incomplete_offload_age",
            "cluster_name",
            "admin_url",
        )
        return {k: getattr(self, k) for k in names if getattr(self, k)}


def sandbox_settings(workdir: str | Path) -> SandboxSettings:
    """Read a sandbox started with ``ledgerlens sandbox up`` or ``sandbox-local up``.

    Raises ``ConfigError`` (one line) when ``state.json`` is missing or unreadable.
    """
    d = Path(workdir)
    state_file = d / "state.json"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"sandbox {workdir}: cannot read {state_file} ({e}); is it up?") from e
    truth: dict[str, Any] = {}
    try:
        truth = json.loads((d / "ground_truth.json").read_text())
    except (OSError, ValueError):
        pass  # not seeded yet: addresses only
    zookeeper = str(state.get("zookeeper_hosts") or state.get("zk_hosts") or "")
    root = str(truth.get("root") or "")
    if zookeeper and root and root != "/":
        zookeeper += "/" + root.strip("/")
    age = truth.get("max_age_s")  # a real cluster's planted anomalies are this old at least
    return SandboxSettings(
        workdir=str(d.resolve()),
        zookeeper=zookeeper,
        s3_endpoint=str(state.get("s3_endpoint") or ""),
        bucket=str(state.get("bucket") or ""),
        as_of=str(truth["now_ms"]) if truth.get("now_ms") else "",
        min_orphan_age=f"{int(age)}s" if age else "",
        retention_grace=f"{int(age)}s" if age else "",
        incomplete_offload_age=f"{int(age)}s" if age else "",
        cluster_name=str(state.get("cluster") or ""),
        admin_url=str(state.get("web_url") or ""),
    )


def sandbox_credentials() -> None:
    """Dummy S3 credentials for a sandbox's S3 server, unless credentials are already configured."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, SANDBOX_AWS_DUMMY)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def sandbox_flags(flags: Mapping[str, Any], sandbox: str | Path | None) -> dict[str, Any]:
    """``flags`` with every empty input filled from ``sandbox`` (explicit values win).

    Without a sandbox, ``flags`` unchanged. With one, dummy S3 credentials are set (unless any are).
    """
    out = dict(flags)
    if not sandbox:
        return out
    sb = sandbox_settings(sandbox)
    sandbox_credentials()
    for key, value in sb.flags().items():
        if out.get(key) in (None, ""):
            out[key] = value
    return out


def deletion_inputs(params: Mapping[str, Any], sandbox: str | Path | None) -> dict[str, Any]:
    """The approval runbook's ``plan_path``, ``journal_path`` and ``admin_url`` with the empty ones
    filled (explicit values win).

    With a sandbox: ``DIR/plan.json``, ``DIR/deletion-journal.jsonl`` and the sandbox broker's web
    service (a ``sandbox-local`` one has none); ``ConfigError`` when ``DIR/state.json`` is missing.
    Without one: ``plan.json`` and ``deletion-journal.jsonl`` in the working directory.
    """
    out = dict(params)
    sb = sandbox_settings(sandbox) if sandbox else None
    base = Path(sb.workdir) if sb else Path()
    defaults = {
        "plan_path": str(base / PLAN_FILE),
        "journal_path": str(base / JOURNAL_FILE),
        "admin_url": sb.admin_url if sb else "",
    }
    for key, value in defaults.items():
        if out.get(key) in (None, ""):
            out[key] = value
    return out
