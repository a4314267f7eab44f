"""Every threshold of the audit reaches every path: a flag of audit and report (the runbook's
parameter of the same name), a context key, an environment variable, one README table."""

from __future__ import annotations

from pathlib import Path

import pytest

from ledgerlens.settings import contexts, inputs

pytestmark = pytest.mark.unit


def test_every_threshold_has_a_flag_a_context_key_and_an_environment_variable() -> None:
    """One table in the README lists them; every audit threshold is a flag of audit and report."""
    from ledgerlens.cli import build_parser
    from ledgerlens.settings import inputs

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    not_thresholds = ("audit.history-keep",)  # how many runs --out/history keeps: no rule reads it
    audit_settings = [
        s
        for s in contexts.SETTINGS
        if s.key.startswith("audit.") and s.kind in ("duration", "int") and s.key not in not_thresholds
    ]
    assert sorted(s.flag for s in audit_settings) == sorted(inputs.THRESHOLDS)
    parser = build_parser()
    for s in audit_settings:
        assert s.env and s.flag
        row = f"| `--{s.flag.replace('_', '-')}`, `{s.flag}` | `{s.key}` | `{s.env}` |"
        assert row in readme, row
        for command in ("audit", "report"):
            args = parser.parse_args(
                [command, "--zookeeper", "h:1", "--out", "o", f"--{s.flag.replace('_', '-')}", "5"]
            )
            assert getattr(args, s.flag) == "5"


def test_a_sandbox_fills_the_age_thresholds(tmp_path: Path) -> None:
    import json

    (tmp_path / "state.json").write_text(json.dumps({"zookeeper_hosts": "127.0.0.1:2181"}))
    (tmp_path / "ground_truth.json").write_text(json.dumps({"max_age_s": 95}))
    flags = inputs.sandbox_flags({"min_orphan_age": "", "incomplete_offload_age": None}, tmp_path)
    assert (flags["min_orphan_age"], flags["retention_grace"], flags["incomplete_offload_age"]) == (
        "95s",
    ) * 3
    audit = contexts.resolve(None, flags=flags).audit_inputs("")[2]
    assert audit.incomplete_offload_age_s == audit.min_orphan_age_s == audit.retention_grace_s == 95
