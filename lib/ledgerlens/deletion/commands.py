"""The deletion commands of the ``ledgerlens`` CLI: ``plan``, ``approve``, ``publish``, ``deleter``.

``ledgerlens.cli`` adds these parsers and dispatches to the ``cmd_*`` functions here.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from ledgerlens.deletion.approval import approve
from ledgerlens.deletion.journal import Journal
from ledgerlens.deletion.messages import DELETION_TOPIC, SUBSCRIPTION
from ledgerlens.deletion.plan import DEFAULT_KINDS, PLANNABLE_KINDS, build_plan, format_plan, write_plan
from ledgerlens.errors import ConfigError
from ledgerlens.settings.config import parse_duration

EXIT_OK = 0


def _sandbox_state(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    state_file = Path(path) / "state.json"
    try:
        return dict(json.loads(state_file.read_text()))
    except (OSError, ValueError) as e:
        raise ConfigError(f"sandbox {path}: cannot read {state_file} ({e}); is it up?") from e


# each command's --help line and description
_COMMAND_HELP: dict[str, tuple[str, str]] = {
    "plan": (
        "turn an audit's findings into a deletion plan (plan.json, with plan_hash)",
        "Findings -> deletion plan: only orphan ledgers and orphan offload objects by default "
        "(never unattributed or foreign findings, never critical ones), the state each item must still be "
        "in, and a SHA-256 plan_hash. Deletes nothing.",
    ),
    "approve": (
        "approve a plan (or part of it) into the deletion journal",
        "Check the plan hash, age, approver and reason, then append the approval to the journal "
        "and write approval.json. A wrong hash, a plan older than --max-age, an empty approver or reason, "
        "or (with --forbid-self-approval / $LEDGERLENS_FORBID_SELF_APPROVAL=1) the auditor approving "
        "their own audit is refused.",
    ),
    "publish": (
        "phase 1: send the approved items to the deletion topic (PendingDeleteLedgerInfo)",
        "Send one PendingDeleteLedgerInfo per approved item to the deletion topic; re-runs send "
        "only what was not sent yet. Deletes nothing.",
    ),
    "deleter": (
        "phase 2: consume the deletion topic, re-verify, delete (dry run unless --execute)",
        "Consume the deletion topic on a Shared subscription; re-verify every message against the "
        "journal's approvals and the live stores; delete only with --execute. Failures are retried through "
        "the retry topic, then dead-lettered.",
    ),
}


def _parser(sub: Any, name: str) -> Any:
    help_, description = _COMMAND_HELP[name]
    return sub.add_parser(name, help=help_, description=description)


def add_parsers(sub: Any) -> None:
    """Add ``plan``, ``approve``, ``publish`` and ``deleter`` to the CLI's subparsers."""
    _add_plan_parser(sub)
    _add_approve_parser(sub)
    _add_publish_parser(sub)
    d = _add_deleter_parser(sub)
    _add_deleter_store_arguments(d)
    _add_deleter_run_arguments(d)
    _add_deleter_kafka_arguments(d)


def _add_context_argument(parser: Any, what: str) -> None:
    parser.add_argument(
        "--context",
        metavar="NAME",
        default=None,
        help=f"named cluster context: {what} (ledgerlens contexts show NAME)",
    )


def _add_repeatable(parser: Any, flag: str, metavar: str, help_: str) -> None:
    """A flag given any number of times: its values in a list, empty when it is not given."""
    parser.add_argument(flag, action="append", default=[], metavar=metavar, help=help_)


def _add_plan_parser(sub: Any) -> None:
    p = _parser(sub, "plan")
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
    _add_repeatable(
        p,
        "--filter",
        "EXPR",
        "keep findings matching COLUMN OP VALUE (OP = != ~ >= <= > <), e.g. tenant=ll-app, "
        "'namespace~ll-app/*', 'age>=7d', 'bytes>=1GiB'; repeat to AND",
    )


def _add_approve_parser(sub: Any) -> None:
    a = _parser(sub, "approve")
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


def _add_publish_parser(sub: Any) -> None:
    pub = _parser(sub, "publish")
    pub.add_argument(
        "--approval", required=True, metavar="FILE", help="approval.json from 'ledgerlens approve'"
    )
    pub.add_argument("--journal", required=True, metavar="FILE", help="the deletion journal")
    pub.add_argument(
        "--service-url", default="", metavar="URL", help="Pulsar service URL (pulsar://host:6650)"
    )
    _add_context_argument(pub, "its pulsar.service-url and token")
    pub.add_argument(
        "--sandbox", dest="pulsar_sandbox", default=None, metavar="DIR", help="a ledgerlens sandbox"
    )
    pub.add_argument("--topic", default=DELETION_TOPIC, help=f"deletion topic (default {DELETION_TOPIC})")
    pub.add_argument("--batch-size", type=int, default=500, metavar="N", help="messages per batch (500)")


def _add_deleter_parser(sub: Any) -> Any:
    """The ``deleter`` parser with ``--journal`` and ``--context``; its other arguments follow."""
    d = _parser(sub, "deleter")
    d.add_argument("--journal", required=True, metavar="FILE", help="the deletion journal")
    _add_context_argument(d, "stores, bucket, URLs, credentials")
    return d


# where the deleter reads and deletes: (flag, metavar, help), each None unless given
_DELETER_STORES = (
    ("--zookeeper", "HOST:PORT", "the Pulsar metadata store"),
    ("--bookkeeper-zookeeper", "HOST:PORT", "BookKeeper's metadata store when it is not the Pulsar one"),
    ("--sandbox", "DIR", "a ledgerlens sandbox (addresses from state.json)"),
    ("--service-url", "URL", "Pulsar service URL"),
    ("--web-url", "URL", "Pulsar admin URL (load_topic, in-flight gauge)"),
    ("--s3-endpoint", "URL", "S3 endpoint of the tiered-storage bucket"),
    ("--bucket", "NAME", "tiered-storage bucket"),
    ("--cluster-name", "NAME", "refuse objects another cluster wrote"),
)


def _add_deleter_store_arguments(d: Any) -> None:
    """Where the deleter reads and deletes: metadata stores, Pulsar, the bucket (``_DELETER_STORES``)."""
    for flag, metavar, help_ in _DELETER_STORES:
        d.add_argument(flag, default=None, metavar=metavar, help=help_)


def _add_deleter_run_arguments(d: Any) -> None:
    """How the deleter consumes, retries and reports; the ledgers root and the references it re-reads."""
    d.add_argument("--topic", default=DELETION_TOPIC, help=f"deletion topic (default {DELETION_TOPIC})")
    d.add_argument("--subscription", default=SUBSCRIPTION, help=f"subscription (default {SUBSCRIPTION})")
    d.add_argument("--parallelism", type=int, default=2, metavar="N", help="worker threads (2)")
    d.add_argument("--batch-size", type=int, default=100, metavar="N", help="messages per batch (100)")
    d.add_argument("--retry-delay", default="10m", metavar="DURATION", help="delay before a retry (10m)")
    d.add_argument("--max-attempts", type=int, default=10, metavar="N", help="attempts before the DLQ (10)")
    d.add_argument("--execute", action="store_true", help="really delete (default: dry run)")
    d.add_argument(
        "--until-idle", default=None, metavar="DURATION", help="stop after this long with no message"
    )
    d.add_argument(
        "--metrics-port", type=int, default=None, metavar="PORT", help="serve /metrics on 127.0.0.1:PORT"
    )
    d.add_argument("--metrics-textfile", default=None, metavar="FILE", help="write Prometheus textfile here")
    d.add_argument(
        "--ledgers-root", default=None, metavar="PATH", help="BookKeeper ledgers root (default /ledgers)"
    )
    d.add_argument(
        "--reference-max-age",
        default="5m",
        metavar="DURATION",
        help="read every reference of the Pulsar stores again when the last read is older (5m)",
    )
    _add_repeatable(
        d,
        "--reference-store",
        "HOST:PORT",
        "another Pulsar metadata store sharing the BookKeeper cluster or bucket: whatever it "
        "references is never deleted (repeatable)",
    )


def _add_deleter_kafka_arguments(d: Any) -> None:
    k = d.add_argument_group("Kafka remote segments (plans of 'ledgerlens kafka-audit' findings)")
    k.add_argument(
        "--kafka-bootstrap-servers",
        default=None,
        metavar="HOST:PORT",
        help="the Kafka cluster whose __remote_log_metadata topic is re-read before each deletion",
    )
    k.add_argument("--kafka-metadata-dump", default=None, metavar="FILE", help="... or a dump of that topic")
    k.add_argument(
        "--kafka-s3-endpoint",
        default=None,
        metavar="URL",
        help="S3 endpoint of the Kafka remote storage (the bucket and prefix come from the approved plan)",
    )


def cmd_plan(args: argparse.Namespace) -> int:
    kinds = [k for arg in args.kinds or [] for k in arg.split(",") if k] or None
    plan = build_plan(args.findings, kinds=kinds, filters=args.filter)
    path = write_plan(plan, args.out)
    print(format_plan(plan))
    print(f"plan: {path}")
    print(f"next: ledgerlens approve --plan {path} --plan-hash {plan['plan_hash']} --approver NAME ...")
    return EXIT_OK


def cmd_approve(args: argparse.Namespace) -> int:
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
    from ledgerlens.deletion.metrics import DeletionMetrics  # prometheus_client: not at CLI start (--help)
    from ledgerlens.deletion.publish import publish, pulsar_client
    from ledgerlens.settings import contexts  # urllib, ssl (via runtime.preflight): not at CLI start

    state = _sandbox_state(args.pulsar_sandbox)
    if args.pulsar_sandbox and not args.service_url and not state.get("service_url"):
        # 'sandbox-local up' starts ZooKeeper and an S3 server only; 'sandbox up' records service_url
        kind = "a 'sandbox-local' one: ZooKeeper and S3 only" if "zk_hosts" in state else "no service_url"
        raise ConfigError(
            f"sandbox {args.pulsar_sandbox} has no Pulsar broker ({kind}); publish needs one: "
            "use a 'ledgerlens sandbox up --workdir DIR' sandbox or give --service-url pulsar://host:6650"
        )
    settings = contexts.resolve(
        args.context, flags={"service_url": args.service_url or state.get("service_url")}
    )
    token = settings.admin_token()
    kwargs: dict[str, Any] = {}
    if token is not None:
        import pulsar  # pulsar-client: only with a token to send

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


def deleter_config(args: argparse.Namespace) -> Any:
    """DeleterConfig from the ``deleter`` arguments, resolved like every input
    (``ledgerlens.settings.contexts``: default < ``--context`` < ``LEDGERLENS_*`` < flags; ``--sandbox``
    fills the flags left empty)."""
    from ledgerlens.deletion.deleter import DeleterConfig  # kazoo, pyspark: not at CLI start (--help)
    from ledgerlens.deletion.verify import Roots
    from ledgerlens.settings import contexts  # urllib, ssl (via runtime.preflight): not at CLI start

    state = _sandbox_state(args.sandbox)
    for flag, hosts in [("--bookkeeper-zookeeper", args.bookkeeper_zookeeper)] + [
        ("--reference-store", h) for h in args.reference_store
    ]:
        if hosts:
            contexts.check_connect_string("metadata.zookeeper", hosts, flag)
    settings = contexts.resolve(
        getattr(args, "context", None),
        flags={
            "zookeeper": args.zookeeper,
            "ledgers_root": args.ledgers_root,
            "service_url": args.service_url or state.get("service_url"),
            "admin_url": args.web_url or state.get("web_url"),
            "s3_endpoint": args.s3_endpoint,
            "bucket": args.bucket,
            "cluster_name": args.cluster_name,
        },
    )
    pulsar_zk, bookkeeper_zk, ledgers_root = deleter_stores(settings, args.bookkeeper_zookeeper)
    return DeleterConfig(
        zookeeper=pulsar_zk,
        bookkeeper_zookeeper=bookkeeper_zk,
        service_url=settings["pulsar.service-url"],
        web_url=settings["pulsar.admin-url"] or None,
        s3=settings.s3_source(),
        topic=args.topic,
        subscription=args.subscription,
        parallelism=args.parallelism,
        batch_size=args.batch_size,
        retry_delay_s=float(parse_duration(args.retry_delay)),
        max_attempts=args.max_attempts,
        execute=bool(args.execute),
        until_idle_s=float(parse_duration(args.until_idle)) if args.until_idle else None,
        roots=Roots(ledgers=ledgers_root),
        zookeeper_auth=settings.zookeeper_auth(),
        cluster_name=settings["pulsar.cluster-name"] or None,
        textfile=args.metrics_textfile,
        pulsar_token=settings.admin_token(),
        kafka_bootstrap_servers=args.kafka_bootstrap_servers,
        kafka_metadata_dump=args.kafka_metadata_dump,
        kafka_s3_endpoint=args.kafka_s3_endpoint,
        pulsar_stores=tuple(args.reference_store),
        reference_max_age_s=float(parse_duration(args.reference_max_age)),
    )


def deleter_stores(settings: Any, bookkeeper_zookeeper: str | None = None) -> tuple[str, str | None, str]:
    """(Pulsar ZooKeeper, BookKeeper ZooKeeper or None when the same, ledgers root) of resolved settings.

    The deleter deletes from live stores only, and re-verifies against exactly one Pulsar metadata
    store: a snapshot, or several Pulsar stores sharing the BookKeeper cluster, is refused.
    """
    from ledgerlens.sources.zookeeper import LiveZooKeeper  # kazoo, pyspark: not at CLI start (--help)

    ledgers_root = settings["metadata.ledgers-root"] or "/ledgers"
    if bookkeeper_zookeeper:  # explicit flag: the Pulsar store is --zookeeper (or the context's)
        if not settings["metadata.zookeeper"]:
            raise ConfigError("--zookeeper HOST:PORT is required (or --sandbox DIR or --context NAME)")
        return settings["metadata.zookeeper"], bookkeeper_zookeeper, ledgers_root
    stores = settings.stores()
    bk, pulsar = stores.bookkeeper, stores.pulsar
    if len(pulsar) != 1:
        raise ConfigError(
            f"the deleter re-verifies against one Pulsar metadata store, {len(pulsar)} given: "
            "run it once per cluster"
        )
    if not isinstance(bk, LiveZooKeeper) or not isinstance(pulsar[0], LiveZooKeeper):
        raise ConfigError(
            "the deleter deletes from live ZooKeeper stores only (not a snapshot): "
            "name them with --zookeeper/--bookkeeper-zookeeper or a context's metadata.zookeeper"
        )
    pz, bz = pulsar[0].zk, bk.zk
    return pz.hosts, (bz.hosts if bz.hosts != pz.hosts else None), bz.ledgers_root or ledgers_root


def cmd_deleter(args: argparse.Namespace) -> int:
    from ledgerlens.deletion.deleter import Deleter  # kazoo, pyspark: not at CLI start (--help)
    from ledgerlens.deletion.metrics import DeletionMetrics

    cfg = deleter_config(args)
    metrics = DeletionMetrics()
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    mode = "EXECUTE: deleting" if cfg.execute else "dry run (nothing is deleted; --execute deletes)"
    print(f"deleter {cfg.instance}: {mode}; topic {cfg.topic}", file=sys.stderr)

    def progress(r: Any) -> None:
        print("  " + ", ".join(f"{k} {n}" for k, n in sorted(r.outcomes.items())), file=sys.stderr)

    report = Deleter(cfg, Journal(args.journal), metrics, progress=progress).run()
    if report.signal is not None:  # the batch in hand finished; the rest stays in the subscription
        term = report.signal == signal.SIGTERM
        done = ", ".join(f"{k} {n}" for k, n in sorted(report.outcomes.items())) or "nothing done"
        print(
            f"ledgerlens deleter: {'terminated' if term else 'interrupted'} after {report.messages} messages "
            f"({done}); the others stay in the subscription",
            file=sys.stderr,
        )
        return 143 if term else 130
    verb = "did" if cfg.execute else "would do"
    print(f"{report.messages} messages in {report.seconds:.1f} s; {verb}:")
    for k, n in sorted(report.outcomes.items()):
        print(f"  {k:<20} {n:>8}")
    return EXIT_OK


COMMANDS = {"plan": cmd_plan, "approve": cmd_approve, "publish": cmd_publish, "deleter": cmd_deleter}
