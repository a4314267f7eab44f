"""Findings that explain themselves: every kind has a reason, a next step with names filled in, a rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ledgerlens.audit.findings import KINDS, PULSAR_KINDS
from ledgerlens.report import explanations as ex

pytestmark = pytest.mark.unit

WHERE = {"zookeeper": "zk1:2181/pulsar", "bucket": "offload-b", "s3_endpoint": "http://s3.local:9000"}


def row(**kw: Any) -> dict[str, Any]:
    ev = kw.pop("evidence", {})
    return {"evidence": json.dumps(ev), **kw}


def test_every_kind_has_an_explainer_and_a_rule_section() -> None:
    """Add an explainer (report/explanations.py) and a ``### `kind` `` section (docs/audit-rules.md)."""
    missing = [k for k in PULSAR_KINDS if k not in ex.EXPLAINERS]
    assert not missing, f"kinds without an explainer in ledgerlens.report.explanations: {missing}"
    sections = ex.rule_sections()
    assert sections, "docs/audit-rules.md not found next to the library"
    no_section = [k for k in PULSAR_KINDS if not sections.get(k)]
    assert not no_section, f"kinds without a '### `kind`' section in docs/audit-rules.md: {no_section}"


def test_kafka_kinds_explain_through_the_fallback_until_they_have_their_own() -> None:
    """The KIP-405 kinds (docs elsewhere) get the generic explanation: their evidence's problem."""
    for kind in (k for k in KINDS if k not in PULSAR_KINDS and k not in ex.EXPLAINERS):
        e = ex.explain({"kind": kind, "object_key": "t-0/seg", "evidence": '{"problem": "stuck for 3 d"}'})
        assert "stuck for 3 d" in e.reason and "t-0/seg" in e.next_step


def test_corrupt_metadata_says_why_and_where() -> None:
    for problem in ("ensembleSize: banana", "NoAuthError", "format version 7 not supported"):
        e = ex.explain(
            row(
                kind="corrupt_metadata",
                severity="critical",
                path="/ledgers/00/0000/L0042",
                ledger_id=42,
                evidence={"table": "bk_ledgers", "problem": problem},
            ),
            WHERE,
        )
        assert problem in e.reason and "/ledgers/00/0000/L0042" in e.reason
        assert "zookeeper-shell -server zk1:2181/pulsar" in e.next_step
        assert e.rule == "docs/audit-rules.md#corrupt_metadata"
    noauth = ex.explain(row(kind="corrupt_metadata", path="/p", evidence={"problem": "NoAuthError"}), WHERE)
    assert "getAcl /p" in noauth.next_step


def test_orphan_ledger_names_topic_subscription_and_commands() -> None:
    e = ex.explain(
        row(
            kind="orphan_ledger",
            severity="warning",
            component="cursor",
            ledger_id=1234,
            managed_ledger="acme/orders/persistent/new%20orders",
            cursor="billing",
            bytes=3 * 1024**2,
            age_seconds=3 * 86400,
            evidence={"owner_exists": True},
        )
    )
    assert "1234" in e.reason and "persistent://acme/orders/new orders" in e.reason
    assert "billing" in e.reason and "3.0 MiB" in e.reason and "3.0 d" in e.reason
    assert "bookkeeper shell ledgermetadata -ledgerid 1234" in e.next_step
    # names are shell-quoted so the command can be pasted
    assert "pulsar-admin topics info-internal 'persistent://acme/orders/new orders'" in e.next_step


def test_offload_object_commands_name_bucket_key_and_endpoint() -> None:
    e = ex.explain(
        row(
            kind="orphan_offload_object",
            object_key="abc-ledger-7",
            bytes=10,
            evidence={"bucket": "offload-b", "uuid": "abc", "ledger_id": 7, "role": "data"},
        ),
        WHERE,
    )
    assert "abc-ledger-7" in e.reason and "offload-b" in e.reason
    assert (
        "aws s3api head-object --endpoint-url http://s3.local:9000 --bucket offload-b --key abc-ledger-7"
        in e.next_step
    )


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_explains_a_sparse_row(kind: str) -> None:
    """Explainers cope with nulls: a reason sentence and a next step, never an exception text."""
    e = ex.explain({"kind": kind, "severity": "warning", "evidence": None, "bytes": float("nan")})
    assert e.reason.endswith(".") and e.next_step.strip()
    assert "explainer failed" not in e.reason
    assert e.anchor == kind


def test_unknown_kind_falls_back_to_the_evidence() -> None:
    e = ex.explain(
        row(
            kind="mystery_offload_object",
            object_key="k1",
            path=None,
            evidence={"problem": "cluster name east does not match west"},
        )
    )
    assert "Mystery offload object" in e.reason and "east does not match west" in e.reason
    assert "docs/audit-rules.md#mystery_offload_object" in e.next_step and "k1" in e.next_step


def test_registry_extends_and_a_broken_explainer_falls_back() -> None:
    reg = ex.Explainers()

    @reg.register("new_kind")
    def _new(f: ex.Finding) -> tuple[str, str]:
        return f"New thing on ledger {f.ledger_id}.", f"ledgerlens look --ledger {f.ledger_id}"

    reg.register("broken", lambda f: (1 / 0, ""))  # type: ignore[return-value]
    assert reg.explain({"kind": "new_kind", "ledger_id": 5}).next_step == "ledgerlens look --ledger 5"
    broken = reg.explain({"kind": "broken", "ledger_id": 5})
    assert "explainer failed: ZeroDivisionError" in broken.reason
    assert "new_kind" in reg.kinds()


def test_rule_sections_parse_headings() -> None:
    text = "# Title\n\n### `a_kind`\n\nfirst\nline\n\n### `b`\nsecond\n## Other\nnot b\n"
    assert ex.rule_sections(text) == {"a_kind": "first\nline", "b": "second"}
