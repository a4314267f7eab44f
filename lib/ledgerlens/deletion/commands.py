"""The deletion commands of the ``ledgerlens`` CLI: ``plan``, ``approve``, ``publish`` (``deleter`` lands
with the shared-store ownership rule).

``ledgerlens.cli`` adds these parsers and dispatches to the ``cmd_*`` functions here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ledgerlens.errors import ConfigError

EXIT_OK = 0


def _sandbox_state(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    state_file = Path(path) / "state.json"
    try:
        return dict(json.loads(state_file.read_text()))
    except (OSError, ValueError) as e:
        raise ConfigError(f"sandbox {path}: cannot read {state_file} ({e}); is it up?") from e


def add_parsers(sub: Any) -> None:
    """Add ``plan``, ``approve`` and ``publish`` to the CLI's subparsers."""
    from ledgerlens.deletion.messages import DELETION_TOPIC
    from ledgerlens.deletion.plan import DEFAULT_KINDS, PLANNABLE_KINDS

    p = sub.add_parser(
        "plan",
        help="turn an audit's findings into a deletion plan (plan.json, with plan_hash)",
        description="Findings -> deletion plan: only orphan ledgers and orphan offload objects by default "
        "(never unattributed or foreign findings, never critical ones), the state each item must still be "
        "in, and a SHA-256 plan_hash. Deletes nothing.",
    )
    p.add_argument("--findings", required=True, metavar="DIR", help="an audit's --out directory")
    p.add_argument("--out", required=True, metavar="FILE", help="plan file to write (plan.json)")
    p.add_argument(
        "--kinds",
        nargs="+",
        metavar="KIND",
        default=None,
        help=f"finding kinds to plan (default {' '.join(DEFAULT_KINDS)}; "
        f"plannable: {', '.join(PLANNABLE_KINDS)})",
    )
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="EXPR",
        help="keep findings matching COLUMN OP VALUE (OP = != ~ >= <= > <), e.g. tenant=ll-app, "
        "'namespace~ll-app/*', 'age>=7d', 'bytes>=1GiB'; repeat to AND",
    )

    a = sub.add_parser(
        "approve",
        help="approve a plan (or part of it) into the deletion journal",
        description="Check the plan hash, age, approver and reason, then append the approval to the journal "
        "and write approval.json. A wrong hash, a plan older than --max-age, an empty approver or reason, "
        "or (with --forbid-self-approval / $LEDGERLENS_FORBID_SELF_APPROVAL=1) the auditor approving "
        "their own audit is refused.",
    )
    a.add_argument("--plan", required=True, metavar="FILE", help="plan.json from 'ledgerlens plan'")
    a.add_argument("--plan-hash", required=True, metavar="SHA256", help="the plan hash you reviewed")
    a.add_argument("--approver", required=True, metavar="NAME", help="who approves")
    a.add_argument("--reason", required=True, metavar="TEXT", help="why")
    a.add_argument("--journal", required=True, metavar="FILE", help="the deletion journal (JSON lines)")
    a.add_argument("--out", required=True, metavar="FILE", help="approval file to write (approval.json)")
    a.add_argument("--items", nargs="+", metavar="ITEM_ID", default=None, help="approve only these item ids")
    a.add_argument("--max-age", default="24h", metavar="DURATION", help="refuse older plans (default 24h)")
    a.add_argument(
        "--forbid-self-approval",
        action="store_true",
        default=None,
        help="refuse when the approver ran the audit or made the plan",
    )

    pub = sub.add_parser(
        "publish",
        help="phase 1: send the approved items to the deletion topic (PendingDeleteLedgerInfo)",
        description="Send one PendingDeleteLedgerInfo per approved item to the deletion topic; re-runs send "
        "only what was not sent yet. Deletes nothing.",
    )
    pub.add_argument(
        "--approval", required=True, metavar="FILE", help="approval.json from 'ledgerlens approve'"
    )
    pub.add_argument("--journal", required=True, metavar="FILE", help="the deletion journal")
    pub.add_argument(
        "--service-url", default="", metavar="URL", help="Pulsar service URL (pulsar://host:6650)"
    )
    pub.add_argument(
        "--context",
        metavar="NAME",
        default=None,
        help="named cluster context: its pulsar.service-url and token (ledgerlens contexts show NAME)",
    )
    pub.add_argument(
        "--sandbox", dest="pulsar_sandbox", default=None, metavar="DIR", help="a ledgerlens sandbox"
    )
    pub.add_argument("--topic", default=DELETION_TOPIC, help=f"deletion topic (default {DELETION_TOPIC})")
    pub.add_argument("--batch-size", type=int, default=500, metavar="N", help="messages per batch (500)")


def cmd_plan(args: argparse.Namespace) -> int:
    from ledgerlens.deletion.plan import build_plan, format_plan, write_plan

    kinds = [k for arg in args.kinds or [] for k in arg.split(",") if k] or None
    plan = build_plan(args.findings, kinds=kinds, filters=args.filter)
    path = write_plan(plan, args.out)
    print(format_plan(plan))
    print(f"plan: {path}")
    print(f"next: ledgerlens approve --plan {path} --plan-hash {plan['plan_hash']} --approver NAME ...")
    return EXIT_OK


def cmd_approve(args: argparse.Namespace) -> int:
    from ledgerlens.config import parse_duration
    from ledgerlens.deletion.approval import approve

    approval = approve(
        args.plan,
        args.journal,
        plan_hash_given=args.plan_hash,
        approver=args.approver,
        reason=args.reason,
        max_age_s=parse_duration(args.max_age),
        forbid_self_approval=args.forbid_self_approval,
        item_ids=args.items,
        out=args.out,
    )
    print(
        f"approved {len(approval['items'])} items of plan {approval['plan_hash']} by {approval['approver']}"
    )
    print(f"approval: {args.out} (journal line {approval['journal_seq']} of {approval['journal']})")
    return EXIT_OK


def cmd_publish(args: argparse.Namespace) -> int:
    from ledgerlens import contexts
    from ledgerlens.deletion.journal import Journal
    from ledgerlens.deletion.metrics import DeletionMetrics
    from ledgerlens.deletion.publish import publish, pulsar_client

    state = _sandbox_state(args.pulsar_sandbox)
    settings = contexts.resolve(
        args.context, flags={"service_url": args.service_url or state.get("service_url")}
    )
    token = settings.admin_token()
    kwargs: dict[str, Any] = {}
    if token is not None:
        import pulsar

        kwargs["authentication"] = pulsar.AuthenticationToken(token.read())
    client = pulsar_client(settings["pulsar.service-url"], **kwargs)
    try:
        res = publish(
            args.approval,
            Journal(args.journal),
            client,
            topic=args.topic,
            batch_size=args.batch_size,
            metrics=DeletionMetrics(),
            progress=lambda n, total: print(f"  published {n}/{total}", file=sys.stderr),
        )
    finally:
        client.close()
    print(
        f"approval {res.approval_id[:16]}: {res.sent} sent, {res.already} already published, "
        f"{len(res.failed)} failed of {res.total}"
    )
    for item_id, err in res.failed[:10]:
        print(f"  failed {item_id}: {err}", file=sys.stderr)
    return EXIT_OK if not res.failed else 2


COMMANDS = {"plan": cmd_plan, "approve": cmd_approve, "publish": cmd_publish}
