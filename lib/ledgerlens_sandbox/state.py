"""The connection a sandbox directory describes (``state.json`` of ``ledgerlens sandbox up``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ledgerlens.errors import ConfigError

__all__ = ["SANDBOX_AWS_DUMMY", "sandbox_inputs"]

SANDBOX_AWS_DUMMY = "ledgerlens-sandbox-dummy-credential"


def sandbox_inputs(sandbox: str | Path) -> dict[str, str]:
    """``{"zookeeper", "s3_endpoint", "bucket"}`` of a running sandbox.

    The sandbox's S3 server is a local moto server that accepts any credentials: dummy ones are
    set in this process's environment when none are configured.

    Raises
    ------
    ConfigError
        No readable ``state.json`` in ``sandbox``.
    """
    state_file = Path(sandbox) / "state.json"
    try:
        state = json.loads(state_file.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"sandbox {sandbox}: cannot read {state_file} ({e}); is it up?") from e
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(k, SANDBOX_AWS_DUMMY)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return {
        "zookeeper": state.get("zookeeper_hosts") or state.get("zk_hosts") or "",
        "s3_endpoint": state.get("s3_endpoint", ""),
        "bucket": state.get("bucket", ""),
    }
