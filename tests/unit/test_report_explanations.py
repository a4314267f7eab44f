"""Findings that explain themselves: every kind has a reason, a next step with names filled in, a rule."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.audit.findings import KAFKA_KINDS, KINDS, PULSAR_KINDS
from ledgerlens.report import explanations as ex
from ledgerlens.report import kinds
from ledgerlens.report.kinds.registry import declare

pytestmark = pytest.mark.unit

WHERE = {"zookeeper": "zk1:2181/pulsar", "bucket": "offload-b", "s3_endpoint": "http://s3.local:9000"}


def row(**kw: Any) -> dict[str, Any]:
    ev = kw.pop("evidence", {})
    return {"evidence": json.dumps(ev), **kw}


def test_every_kind_has_an_explainer_and_a_rule_section() -> None:
    """Add an explainer (report/explanations.py) and a ``### `kind` `` section (docs/audit-rules.md)."""
    missing = [k for k in KINDS if k not in ex.EXPLAINERS]
    assert not missing, f"kinds without an explainer in ledgerlens.report.explanations: {missing}"
    sections = ex.rule_sections()
    assert sections, "docs/audit-rules.md not found next to the library"
    no_section = [k for k in KINDS if not sections.get(k)]
    assert not no_section, f"kinds without a '### `kind`' section in docs/audit-rules.md: {no_section}"
    assert set(KAFKA_KINDS) <= set(KINDS) and set(PULSAR_KINDS) <= set(KINDS)


ROOT = Path(__file__).resolve().parents[2]
RULE_LINE = re.compile(r"^Rule: \[`([^`]+)`\]\(\.\./(lib/ledgerlens/[^)]+)\)", re.M)


def _declaration_names() -> dict[str, str]:
    """Kind name -> the name its subject module binds the declaration to (``ORPHAN_LEDGER``)."""
    subjects = [kinds.ledgers, kinds.offload, kinds.retention, kinds.cursors, kinds.metadata, kinds.kafka]
    return {v.name: n for mod in subjects for n, v in vars(mod).items() if isinstance(v, ex.Kind)}


def _readme_rows(readme: str) -> dict[str, list[str]]:
    """The README findings table: kind -> its cells (meaning, severity), in the table's order."""
    table = readme.split("| kind | meaning | severity |\n", 1)[-1].split("\n\n", 1)[0]
    return {m.group(1): [c.strip() for c in m.group(2).split(" | ")]
            for m in re.finditer(r"^\| `([a-z_]+)` \| (.+) \|$", table, re.M)}  # fmt: skip


def kind_problems(kind: ex.Kind, readme: str, rules_md: str, emitted_as: str = "") -> list[str]:
    """What a declared kind lacks: its explainer, its docs/audit-rules.md section (with a ``Rule:`` line
    naming the declared module), its README row naming its severities, a rule module that emits it."""
    problems = []
    if kind.name not in ex.EXPLAINERS:
        problems.append("no explainer (the generic fallback answers)")
    head = f"### `{kind.anchor}`\n"
    section = rules_md.split(head, 1)[1].split("\n#", 1)[0] if head in rules_md else ""
    if not ex.rule_sections(rules_md).get(kind.anchor):
        problems.append("no '### `kind`' section in docs/audit-rules.md")
    m = RULE_LINE.search(section)
    if not m or m.groups() != (kind.rule, "lib/ledgerlens/" + kind.rule):
        problems.append(f"its docs section has no 'Rule: [`{kind.rule}`](../lib/ledgerlens/...)' line")
    cells = _readme_rows(readme).get(kind.name)
    if cells is None:
        problems.append("no row in README.md's findings table")
    elif not all(re.search(rf"\b{s}\b", cells[-1]) for s in kind.severities):
        problems.append(f"README.md's severity cell {cells[-1]!r} does not name {kind.severities}")
    source = ROOT / "lib" / "ledgerlens" / kind.rule
    if not source.is_file():
        problems.append(f"rule module {kind.rule} does not exist")
    elif f'"{kind.name}"' not in (text := source.read_text()) and not (emitted_as and emitted_as in text):
        problems.append(f"rule module {kind.rule} does not emit it")
    return problems


def test_every_kind_has_a_readme_row_and_its_rule_file() -> None:
    """Each kind is one declaration (``ledgerlens.report.kinds``): it has an explainer, a section in
    docs/audit-rules.md linking the declared rule module (one step from the docs to the code), a
    README row naming its severities, and that module emits it."""
    readme = (ROOT / "README.md").read_text()
    rules_md = (ROOT / "docs" / "audit-rules.md").read_text()
    names = _declaration_names()
    assert set(names) == set(ex.DECLARED), "every declaration is bound to a name in its subject module"
    wrong_subject = [
        k for k, d in ex.DECLARED.items() if d.explain.__module__ != f"{kinds.__name__}.{d.subject}"
    ]
    assert not wrong_subject, f"declared outside the module of their subject: {wrong_subject}"
    problems = {k: p for k, d in ex.DECLARED.items() if (p := kind_problems(d, readme, rules_md, names[k]))}
    assert not problems, problems
    assert "Rule: [" not in "".join(ex.rule_sections().values()), "the report shows no source link"
    # every declared kind is in exactly one audit's table, whose order the README's table follows
    assert sorted(KINDS) == sorted(ex.DECLARED) and len(set(KINDS)) == len(KINDS)
    assert KINDS == tuple(k.name for k in ex.PULSAR + ex.KAFKA)
    assert PULSAR_KINDS == tuple(k.name for k in ex.PULSAR) and KAFKA_KINDS == tuple(k.name for k in ex.KAFKA)
    assert list(_readme_rows(readme)) == list(KINDS), "README.md's findings table is in KINDS order"
    assert all(k.subject == "kafka" for k in ex.KAFKA) and all(k.subject != "kafka" for k in ex.PULSAR)


def test_an_incomplete_declaration_is_caught() -> None:
    """The check above fails for a kind declared without its docs section, README row or rule module."""
    readme = (ROOT / "README.md").read_text()
    rules_md = (ROOT / "docs" / "audit-rules.md").read_text()
    made_up = ex.Kind(
        name="stray_ledger", severity="warning", subject="ledgers", rule="audit/rules/stray.py",
        explain=lambda f: ("A stray ledger.", "Look at it."),
    )  # fmt: skip
    problems = " / ".join(kind_problems(made_up, readme, rules_md))
    lacks = ("no explainer", "no '### `kind`' section", "no 'Rule: [", "no row in README", "does not exist")
    for lack in lacks:
        assert lack in problems, (lack, problems)
    # a real kind pointed at a module that does not emit it, or with a severity its README row lacks
    orphan = ex.declared("orphan_ledger")
    wrong_rule = ex.Kind(**{**vars(orphan), "rule": "audit/rules/cursors.py"})
    assert kind_problems(wrong_rule, readme, rules_md) == [
        "its docs section has no 'Rule: [`audit/rules/cursors.py`](../lib/ledgerlens/...)' line",
        "rule module audit/rules/cursors.py does not emit it",
    ]
    wider = ex.Kind(**{**vars(orphan), "also": ("critical",)})
    assert kind_problems(wider, readme, rules_md) == [
        "README.md's severity cell 'warning' does not name ('warning', 'critical')"
    ]
    assert kind_problems(orphan, readme, rules_md) == []


def test_declared_severities() -> None:
    """A rule takes a kind's severity from its declaration; another severity must be declared."""
    assert ex.severity_of("missing_ledger") == "critical" and ex.severity_of("foreign_ledger") == "info"
    missing = ex.declared("missing_offload_object")
    assert missing.severities == ("critical", "warning") and missing.other("warning") == "warning"
    with pytest.raises(ValueError, match="not declared"):
        ex.declared("orphan_ledger").other("critical")
    with pytest.raises(ValueError, match="declared twice"):
        declare(ex.declared("orphan_ledger"))


KAFKA_WHERE = {"bootstrap_servers": "kafka1:9092", "s3_endpoint": "http://s3.local:9000"}
SEGMENT = {
    "store": "s3://tiered/kafka/",
    "topic": "orders",
    "topic_id": "Xy1",
    "partition": 3,
    "segment_id": "SEG9",
    "start_offset": 100,
    "end_offset": 199,
    "metadata_partition": 7,
    "metadata_offset": 42,
}


@pytest.mark.parametrize("kind", KAFKA_KINDS)
def test_kafka_kinds_have_their_own_explanation(kind: str) -> None:
    """Each KIP-405 kind: its own reason with the segment's names, Kafka commands, its rule link."""
    e = ex.explain(
        row(
            kind=kind,
            severity="warning",
            component="kafka-remote",
            path="orders-3/SEG9",
            object_key="kafka/orders-Xy1/3/00000000000000000100-SEG9.log",
            bytes=2048,
            age_seconds=3 * 86400,
            action="investigate",
            evidence={
                **SEGMENT,
                "role": "log",
                "missing_roles": ["indexes"],
                "records": 5000,
                "live_segments": 2,
                "records_per_live_segment": 2500.0,
            },  # fmt: skip
        ),
        KAFKA_WHERE,
    )
    generic = ex.generic(ex.Finding({"kind": kind}))[0].split(" on ")[0]
    assert not e.reason.startswith(generic), e.reason  # not the generic fallback
    assert e.rule == f"docs/audit-rules.md#{kind}"
    text = e.reason + "\n" + e.next_step
    if kind != "remote_segment_metadata_growth":
        assert "orders" in text and ("SEG9" in text or "orders-3" in text), text
    assert "zookeeper-shell" not in e.next_step and "pulsar-admin" not in e.next_step
    assert "kafka1:9092" in e.next_step or "aws s3api" in e.next_step, e.next_step


def test_kafka_object_commands_name_the_store() -> None:
    orphan = row(
        kind="remote_segment_orphan_object",
        object_key="kafka/orders-Xy1/3/00000000000000000100-SEG9.log",
        bytes=10,
        action="delete_object",
        evidence={**SEGMENT, "role": "log", "corrupt_metadata_records": 0},
    )
    e = ex.explain(orphan, KAFKA_WHERE)
    key = "kafka/orders-Xy1/3/00000000000000000100-SEG9.log"
    assert (
        f"aws s3api delete-object --endpoint-url http://s3.local:9000 --bucket tiered --key {key}"
        in e.next_step
    )
    assert "kafka-topics.sh --bootstrap-server kafka1:9092 --describe --topic orders" in e.next_step
    # a corrupt metadata record may name the segment: no delete command then
    blind = dict(orphan, evidence=json.dumps({**SEGMENT, "corrupt_metadata_records": 2}))
    assert "delete-object" not in ex.explain(blind, KAFKA_WHERE).next_step
    local = dict(orphan, evidence=json.dumps({**SEGMENT, "store": "file:///data/kafka-tiered-storage"}))
    assert f"ls -l /data/kafka-tiered-storage/{key}" in ex.explain(local, KAFKA_WHERE).next_step
    missing = ex.explain(
        row(
            kind="remote_segment_missing_object",
            severity="critical",
            object_key=key,
            evidence={**SEGMENT, "missing_roles": ["indexes", "rsm-manifest"]},
        ),  # fmt: skip
        KAFKA_WHERE,
    )
    assert "indexes, rsm-manifest" in missing.reason and "offsets 100 to 199" in missing.reason
    assert "get-bucket-lifecycle-configuration --bucket tiered" in missing.next_step


def test_kafka_corrupt_record_reads_it_with_kafkas_formatter() -> None:
    e = ex.explain(
        row(
            kind="corrupt_metadata",
            severity="critical",
            component="kafka-remote",
            path="__remote_log_metadata/7@42",
            evidence={
                "metadata_topic": "__remote_log_metadata",
                "metadata_partition": 7,
                "metadata_offset": 42,
                "problem": "truncated record",
            },  # fmt: skip
        ),
        KAFKA_WHERE,
    )
    assert "truncated record" in e.reason and "__remote_log_metadata/7@42" in e.reason
    assert "--partition 7 --offset 42 --max-messages 1" in e.next_step
    assert "RemoteLogMetadataFormatter" in e.next_step and "zookeeper-shell" not in e.next_step


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
    named = ex.explain(row(kind="corrupt_metadata", path="/p/L1", evidence={"problem": "/p/L1: bad ctime"}))
    assert named.reason.endswith("node /p/L1 cannot be used: bad ctime.")  # the path said once
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


def test_suspicious_metadata_explains_why_not_to_delete() -> None:
    ml = "acme/orders/persistent/emptied"
    caveated = ex.explain(
        row(kind="orphan_ledger", ledger_id=7, managed_ledger=ml, component="managed-ledger", bytes=100,
            action="investigate",
            evidence={"owner_emptied": True, "owner_node": f"/managed-ledgers/{ml}",
                      "owner_znode_version": 2}),
        WHERE,
    )  # fmt: skip
    assert f"/managed-ledgers/{ml} was emptied" in caveated.reason
    assert "Do not delete" in caveated.next_step and "deleteledger" not in caveated.next_step
    emptied = ex.explain(
        row(kind="emptied_managed_ledger", managed_ledger=ml, path=f"/managed-ledgers/{ml}", bytes=100,
            evidence={"znode_version": 2, "owned_ledgers": 1}),
        WHERE,
    )  # fmt: skip
    assert "znode version 2" in emptied.reason and "1 older ledger(s)" in emptied.reason
    assert "zookeeper-shell -server zk1:2181/pulsar stat" in emptied.next_step
    unreadable = ex.explain(row(kind="unreadable_metadata", path="/ledgers/L1", evidence={}), WHERE)
    assert "NoAuth" in unreadable.reason and "getAcl /ledgers/L1" in unreadable.next_step
    assert "never command-line parameters" in unreadable.next_step
