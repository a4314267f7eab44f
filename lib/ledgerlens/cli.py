"""The ``ledgerlens`` command line.

``ledgerlens audit``          run the audit pipeline, print a summary, exit by severity (``--fail-on``)
``ledgerlens report``         run the audit runbook headless (papermill) and convert it to HTML
``ledgerlens lab``            JupyterLab on a scratch copy of the runbooks
``ledgerlens sandbox``        a real Pulsar standalone sandbox: up, seed, plant, status, down
``ledgerlens sandbox-local``  start/seed/inspect/stop a local ZooKeeper + S3 sandbox
``ledgerlens plan``           findings -> a hash-bound deletion plan (deletes nothing)
``ledgerlens approve``        approve a plan into the deletion journal
``ledgerlens publish``        phase 1: approved items to the deletion topic (PIP-186)
``ledgerlens deleter``        phase 2: re-verify and delete (dry run unless ``--execute``)
``ledgerlens contexts``       named cluster contexts: list, show NAME, check NAME
``ledgerlens kafka-audit``    audit Kafka tiered storage (KIP-405): __remote_log_metadata vs. the bucket

Inputs resolve through ``ledgerlens.settings.contexts``: built-in default < context (``--context NAME``,
``$LEDGERLENS_CONTEXT`` or the file's ``current``) < environment (``LEDGERLENS_*``) < flags.

Exit codes: 0 ran; 1 ``contexts check`` found a store that does not answer, or an internal error (one
line; ``--debug`` for the traceback); 2 usage, input or environment error (one ``ledgerlens COMMAND:
error: ...`` line on stderr); 3 ``--fail-on`` threshold hit; 130 interrupted (Ctrl-C); 143
terminated (SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ledgerlens import report
from ledgerlens.deletion import commands as deletion_commands
from ledgerlens.errors import ConfigError, LedgerLensError
from ledgerlens.report import metrics
from ledgerlens.report.text import SEVERITY_ORDER, human_bytes
from ledgerlens.runtime import console, lab, signals
from ledgerlens.runtime.console import Progress, disk_line, process_started, summary_line
from ledgerlens.runtime.console import started_env as console_started
from ledgerlens.runtime.outdir import OutputDir
from ledgerlens.runtime.warm_up import warm_up
from ledgerlens.settings import arguments, inputs
from ledgerlens.settings.config import cache_dir
from ledgerlens.settings.redact import redact, redact_exception, redact_logging
from ledgerlens.settings.request import AuditRequest

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_INTERNAL = 1
EXIT_ERROR = 2
EXIT_FINDINGS = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

FAIL_ON = arguments.FAIL_ON
DEFAULT_NOTEBOOK = arguments.DEFAULT_NOTEBOOK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ledgerlens`` command (``ledgerlens.settings.arguments``)."""
    parser = argparse.ArgumentParser(
        prog="ledgerlens", description="Audit Apache Pulsar storage: orphan ledgers, tiered-storage objects."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    arguments.add_audit_parsers(sub)
    arguments.add_tool_parsers(sub)
    deletion_commands.add_parsers(sub)
    arguments.add_contexts_parsers(sub)
    arguments.add_kafka_parser(sub)
    return parser


def _settings(args: argparse.Namespace) -> Any:
    """Every setting resolved from the context, the environment and these flags."""
    from ledgerlens.settings import contexts  # urllib, ssl (via runtime.preflight): not at CLI start (--help)

    return contexts.resolve(getattr(args, "context", None), flags=vars(args))


def _request(settings: Any, args: argparse.Namespace) -> AuditRequest:
    """The run's ``AuditRequest`` from the resolved settings and the command's own flags."""
    return settings.audit_request(  # type: ignore[no-any-return]
        args.out,
        as_of=args.as_of,
        deep_offload_check=bool(args.deep_offload_check),
        allow_empty_metadata=bool(getattr(args, "allow_empty_metadata", False)),
        read_bookies=bool(getattr(args, "read_bookies", False)),
    )


def _local_python(master: str) -> None:
    """On a local master, Spark's Python workers must be this interpreter (the one with ledgerlens),
    not whatever ``python3`` is first on PATH. An explicit ``PYSPARK_PYTHON`` wins."""
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _spark_session(
    master: str, conf: dict[str, str] | None = None, *, znodes: int | None = None
) -> tuple[Any, bool]:
    """A Spark session and whether this command owns it (and must stop it).

    ``znodes``: how many znodes the metadata stores hold (``preflight``), when every store said; few
    enough (``spark.quick_compile_for``), the JVM, which ends with the command, compiles quickly.
    """
    from pyspark.sql import SparkSession  # pyspark: only when a command starts Spark

    from ledgerlens.runtime.spark import get_session, quick_compile_for

    _local_python(master)
    active = SparkSession.getActiveSession()
    if active is not None:  # called in-process next to a live session (notebook, tests): reuse it
        return active, False
    session = get_session(master, conf=conf, quick_compile=quick_compile_for(znodes))
    signals.install()  # pyspark's SIGINT handler calls into a JVM that may be gone
    return session, True


def _stop_spark(spark: Any, *, hard: bool) -> None:
    """Stop the session; ``hard`` (interrupted): end its JVM at once, never hang on it."""
    proc = getattr(getattr(getattr(spark, "sparkContext", None), "_gateway", None), "proc", None)
    if not hard:
        try:
            spark.stop()
            return
        except Exception:  # noqa: BLE001 - the JVM is already gone: end it below
            pass
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            proc.kill()


def _preflight(
    zk: Any, s3: Any, *, out: Path | None, master: str, allow_empty_metadata: bool, stores: Any = None
) -> dict[str, Any]:
    """Everything checkable before Spark starts (``ledgerlens.runtime.preflight``); what it saw."""
    from ledgerlens.runtime.preflight import preflight  # urllib, ssl: not at CLI start (--help)

    return preflight(
        zk, s3, out=out, spark_master=master, allow_empty_metadata=allow_empty_metadata, stores=stores
    )


def _own_process() -> bool:
    """The process is this command's (the console script, ``python -m ledgerlens.cli``), not a caller's
    that calls ``main`` in-process (tests, notebooks)."""
    return Path(sys.argv[0]).name in ("ledgerlens", "cli.py")


def _progress(args: argparse.Namespace, *, bar: bool | None = None) -> Any:
    """The command's progress display (``ledgerlens.runtime.console.Progress``) on its own clock, from the
    process's start: nothing with ``--no-progress``."""
    started = process_started() if _own_process() else time.time()
    title = f"ledgerlens {args.command}"
    return Progress(enabled=not args.no_progress, title=title, started=started, bar=bar)


CHECKS_QUIET_S = 11.0
"""The store checks are said only once they last this long: each check has its own bound (10 s at
most, ``runtime.preflight``), so a dead endpoint fails in its one error line and nothing before it."""


def _checking(stores: Any, s3: Any) -> str:
    """What the preflight checks, in words (no address: connect strings may carry credentials)."""
    n = len(list(stores.sources())) if stores is not None else 1
    what = "the metadata store" if n == 1 else f"{n} metadata stores"
    return f"checking {what}" + (f" and bucket {s3.bucket}" if s3 is not None and s3.bucket else "")


def exit_code(summary: dict[str, Any], fail_on: str | None) -> int:
    """``EXIT_FINDINGS`` when the summary holds a finding at or above ``fail_on`` (``new-*``: a new
    one, ``new_by_severity``), else ``EXIT_OK``."""
    if not fail_on:
        return EXIT_OK
    counts = summary.get("new_by_severity" if fail_on.startswith("new-") else "counts_by_severity") or {}
    return EXIT_FINDINGS if any(counts.get(s, 0) for s in FAIL_ON[fail_on]) else EXIT_OK


def format_summary(summary: dict[str, Any], out_dir: Path, findings_path: Path | None = None) -> str:
    """A compact, human summary of an audit run."""
    sev = summary.get("counts_by_severity") or {}
    kinds = summary.get("counts_by_kind") or {}
    sizes = summary.get("bytes_by_kind") or {}
    lines = [
        f"{summary.get('total_findings', 0)} findings: "
        + ", ".join(f"{sev.get(s, 0)} {s}" for s in SEVERITY_ORDER)
    ]
    width = max((len(k) for k in kinds), default=0)
    for kind, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"  {kind:<{width}}  {n:>7}  {human_bytes(sizes.get(kind) or 0):>10}")
    dropped = {k: v for k, v in (summary.get("dropped_on_reverify") or {}).items() if v}
    if dropped:
        lines.append(
            "dropped on re-verification: " + ", ".join(f"{k} {v}" for k, v in sorted(dropped.items()))
        )
    note = summary.get("offload_cluster_note")
    if note:
        lines.append(note)
    suspicion = summary.get("suspected_wrong_root")
    if suspicion:
        lines.insert(0, f"SUSPECTED WRONG ROOT: {suspicion.get('message', '')}")
    lines.append(f"findings: {findings_path or out_dir / 'findings.parquet'}")
    lines.append(f"summary:  {out_dir / 'summary.json'}")
    return "\n".join(lines)


def cmd_audit(args: argparse.Namespace) -> int:
    bar = _progress(args)
    with bar.waiting("reading the settings", say_after=2.0):  # said on a slow machine only
        settings = _settings(args)
        request = _request(settings, args)

    master = request.spark_master
    with bar.waiting(_checking(request.stores, request.s3), done="stores checked", say_after=CHECKS_QUIET_S):
        seen = _preflight(
            request.zk,
            request.s3,
            out=request.out_dir,
            master=master,
            allow_empty_metadata=request.allow_empty_metadata,
            stores=request.stores,
        )
    _history(request)  # --previous and --history-keep checked before Spark starts
    from ledgerlens.audit import pipeline  # pyspark: after the stores were checked

    with OutputDir(args.out) as od:
        with bar.waiting(f"starting Spark ({redact(master)})", done="Spark started"):
            spark, owned = _spark_session(master, request.spark_conf, znodes=seen.get("znodes"))
        hard = True
        try:
            run = pipeline.run_request(spark, request, progress=bar, output=od)
            hard = False
        except Exception:
            hard = False
            raise
        finally:
            if owned:
                _stop_spark(spark, hard=hard)
    bar.close()
    _write_metrics(args, run.summary, settings)
    if settings.context:
        print(f"context: {settings.context}")
    print(format_summary(run.summary, Path(run.out_dir), Path(run.findings_path)))
    worst = _worst(run.summary, Path(run.findings_path))
    if (disk := disk_line(run.summary)) is not None:
        print(disk)
    print(summary_line(run.summary, worst=worst, findings=run.findings_path))
    return exit_code(run.summary, request.fail_on or None)


def _history(request: AuditRequest) -> Any:
    """``audit.history.HistoryOptions`` of the request (``audit.previous`` / ``audit.history-keep``)."""
    from ledgerlens.audit.history import HistoryOptions  # pandas, pyspark: not at CLI start

    return HistoryOptions.of(request.previous or None, request.history_keep)


@contextmanager
def _history_env(args: argparse.Namespace) -> Iterator[None]:
    """``--previous`` / ``--history-keep`` (and ``--reverify-objects`` / ``--s3-max-requests``) of
    ``report`` as ``LEDGERLENS_PREVIOUS`` / ``LEDGERLENS_HISTORY_KEEP`` (...) for the runbook's kernel
    (it resolves its settings with the environment layer, and its pipeline reads them there),
    restored afterwards."""
    previous = getattr(args, "previous", None)
    given = {
        "LEDGERLENS_PREVIOUS": str(Path(previous).resolve()) if previous else None,
        "LEDGERLENS_HISTORY_KEEP": getattr(args, "history_keep", None),
        "LEDGERLENS_REVERIFY_OBJECTS": getattr(args, "reverify_objects", None),
        "LEDGERLENS_S3_MAX_REQUESTS": getattr(args, "s3_max_requests", None),
    }
    saved = {k: os.environ.get(k) for k in given}
    for k, v in given.items():
        if v not in (None, ""):
            os.environ[k] = str(v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _worst(summary: dict[str, Any], findings: Path) -> str:
    """The worst finding of a run, in words ('' without findings or without the file)."""
    if not summary.get("total_findings") or not findings.exists():
        return ""
    import pandas as pd  # pandas: only when the run found something

    from ledgerlens.report.html import worst_finding

    return worst_finding(pd.read_parquet(findings))


def _published_cluster(args: argparse.Namespace) -> str | None:
    """The cluster name the run last published in ``--out`` recorded (None: none, or unreadable)."""
    try:
        summary = json.loads((Path(args.out) / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    name = summary.get("cluster_name") if isinstance(summary, dict) else None
    return str(name) if name else None


def _cluster_label(
    args: argparse.Namespace, settings: Any = None, summary: dict[str, Any] | None = None
) -> str:
    """The metrics' ``cluster`` label: the audited Pulsar cluster's name (the run's summary, the
    settings, else, for a failed run, the run last published in ``--out``); the ZooKeeper address
    only while no name is known."""
    name = (
        (summary or {}).get("cluster_name")
        or (settings["pulsar.cluster-name"] if settings is not None else None)
        or getattr(args, "cluster_name", None)
        or (_published_cluster(args) if summary is None else None)
    )
    if name:
        return str(name)
    zookeeper = settings["metadata.zookeeper"] if settings is not None else None
    return redact(zookeeper or getattr(args, "zookeeper", None) or "")


def _write_metrics(args: argparse.Namespace, summary: dict[str, Any] | None, settings: Any = None) -> None:
    """``--metrics-textfile``: the run's metrics, or (``summary=None``) a failed run."""
    path = getattr(args, "metrics_textfile", None)
    if not path:
        return

    label = _cluster_label(args, settings, summary)
    if summary is None:
        metrics.write_failure(path, cluster=label)
    else:
        metrics.write_textfile(path, summary, cluster=label)


def notebook_parameters(args: argparse.Namespace, out_dir: Path | None = None) -> dict[str, Any]:
    """Parameters of the audit runbook from the ``report`` arguments (no credentials, ever).

    The runbook resolves its inputs the same way (``sandbox`` fills what is empty, then
    ``context`` < environment < parameters): it gets the context's name, the sandbox and only the
    flags given here; empty parameters mean "not given". ``out_dir``: where the runbook writes
    (the run's staging directory); default ``--out``.
    """
    request = _request(_settings(args), args)  # validated early, with the same messages as ``audit``
    stores = {  # passed only when given: the runbook's defaults are the same
        "source": args.source or "",
        "zk_data_dir": str(Path(args.zk_data_dir).resolve()) if args.zk_data_dir else "",
        "zk_until": args.zk_until or "",
        "bookkeeper_metadata": args.bookkeeper_metadata or "",
        "pulsar_metadata": " ".join(args.pulsar_metadata or ()),
        "deleted_tenants": " ".join(args.deleted_tenant or ()),
    }
    return {
        **{k: v for k, v in stores.items() if v},
        "context": request.context_name,
        "sandbox": args.sandbox or "",
        "zookeeper": args.zookeeper or "",
        "s3_endpoint": args.s3_endpoint or "",
        "bucket": args.bucket or "",
        "out_dir": str(out_dir or Path(args.out).resolve()),
        **{t: getattr(args, t) or "" for t in inputs.THRESHOLDS},
        "as_of": args.as_of,
        "spark_master": args.spark_master or "",
        "ledgers_root": args.ledgers_root or "",
        "cluster_name": args.cluster_name or "",
        "deep_offload_check": bool(args.deep_offload_check),
        "interactive": False,
    }


def cmd_report(args: argparse.Namespace) -> int:
    bar = _progress(args, bar=False)  # lines: the runbook kernel's are relayed between them
    with bar.waiting("reading the settings", say_after=2.0):  # said on a slow machine only
        settings = _settings(args)
        request = _request(settings, args)
    master = request.spark_master
    notebook = Path(args.notebook) if args.notebook else DEFAULT_NOTEBOOK
    if not notebook.is_file():
        raise ConfigError(f"runbook {notebook} not found: pass --notebook PATH")
    allow = request.allow_empty_metadata
    with bar.waiting(_checking(request.stores, request.s3), done="stores checked", say_after=CHECKS_QUIET_S):
        _preflight(
            request.zk,
            request.s3,
            out=request.out_dir,
            master=master,
            allow_empty_metadata=allow,
            stores=request.stores,
        )
    _local_python(master)  # inherited by the notebook's kernel
    history = _history(request)
    from ledgerlens.audit.history import HISTORY_DIR, prune  # pandas, pyspark: not at CLI start

    html_target = Path(args.html).resolve() if args.html else None
    # the runbook's pipeline finds the previous run beside its staging directory (in --out)
    with OutputDir(args.out) as od, _history_env(args):
        params = notebook_parameters(args, od.staging)
        if allow:
            params["allow_empty_metadata"] = True
        staged_nb = od.staging / notebook.name
        # the kernel's progress lines on this command's clock, relayed as they come
        relay = bar.relay() if bar.enabled else False
        with bar.waiting("running the runbook in a Jupyter kernel"), console_started(bar.started_at):
            executed = report.execute_runbook(
                notebook,
                staged_nb,
                params,
                kernel_name=args.kernel,
                progress=relay,
                kernel_stderr=_kernel_log(),
            )
        report.relocate_notebook(executed, od.staging, od.out)  # paths as they will be once published
        summary = report.read_recorded(executed, "summary")
        try:
            context = report.read_recorded(executed, "context")
        except report.ReportError:  # a runbook of its own that records no context
            context = {}
        title = report.report_title(context) if context else ""
        inside = html_target is None or html_target.parent == od.out
        staged_html = od.staging / (html_target.name if html_target else "report.html")
        if not inside:
            staged_html = od.staging / f".ledgerlens-html-{html_target.name}"  # type: ignore[union-attr]
        with bar.waiting("writing the HTML report", say_after=2.0):
            report.to_html(executed, staged_html, exclude_input=not args.show_code, title=title)
        if not inside:
            assert html_target is not None
            html_target.parent.mkdir(parents=True, exist_ok=True)
            tmp = html_target.with_name(f".{html_target.name}.{os.getpid()}.tmp")
            shutil.move(str(staged_html), tmp)
            os.replace(tmp, html_target)
        od.publish()
        prune(od.out / HISTORY_DIR, history.keep)
        html = html_target or od.out / "report.html"
    bar.close()
    _write_metrics(args, summary, settings)
    if args.no_progress and summary.get("previous_note"):  # the kernel's stderr was not passed on
        print(f"ledgerlens: warning: {summary['previous_note']}", file=sys.stderr)
    print(f"notebook: {od.out / notebook.name}")
    print(f"report:   {html}")
    if (disk := disk_line(summary)) is not None:
        print(disk)
    print(summary_line(summary, worst=_worst(summary, od.out / "findings.parquet"), report=html))
    return exit_code(summary, request.fail_on or None)


KERNEL_LOG = "runbook-kernel.log"
"""The last ``ledgerlens report`` kernel's own stderr, in the cache directory (unless ``--verbose`` or
``--debug``: then on the console). A kernel shut down mid-cell (Ctrl-C) logs its pending tasks there."""


def _kernel_log() -> Path | None:
    from ledgerlens.runtime.spark import QUIET_ENV  # pyspark: the runbook's kernel starts it anyway

    return cache_dir() / KERNEL_LOG if os.environ.get(QUIET_ENV) else None


def cmd_lab(args: argparse.Namespace) -> int:
    """Prepare the scratch copies and replace this process with JupyterLab."""
    work = lab.prepare(args.workdir, sandbox=args.sandbox or "", fresh=args.fresh)
    argv = lab.command(work, port=args.port, token=args.token, open_browser=not args.no_browser)
    print(f"JupyterLab on the runbooks copied to {work} (Ctrl-C stops it)", file=sys.stderr)
    return subprocess.call(argv, env=lab.environment())


def cmd_sandbox(args: argparse.Namespace) -> int:
    """Forward to ``python -m ledgerlens_sandbox.local`` (its ``main``), else drive ``LocalSandbox``."""
    from ledgerlens_sandbox import local  # test machinery (servers, clusters): only through this command

    forward = getattr(local, "main", None)
    if callable(forward):
        argv = [args.action, "--workdir", str(args.workdir)]
        for option in ("scenario", "root", "now_ms", "bucket"):
            value = getattr(args, option)
            if value is not None:
                argv += ["--" + option.replace("_", "-"), str(value)]
        code = forward(argv)
        return int(code or 0)
    sandbox = local.LocalSandbox(Path(args.workdir))
    result = getattr(sandbox, args.action)()
    if result is not None:
        print(json.dumps(result, indent=2, default=str) if isinstance(result, dict | list) else result)
    return EXIT_OK


def cmd_warm_up(args: argparse.Namespace) -> int:
    """``warm-up``: write the class archive (``ledgerlens.runtime.warm_up``)."""
    print("ledgerlens warm-up: recording the classes Spark loads (about a minute)", flush=True)
    try:
        path, size = warm_up()
    except RuntimeError as e:
        print(f"ledgerlens {e}", file=sys.stderr)
        return EXIT_ERROR
    print(f"ledgerlens warm-up: wrote {path} ({size / 2**20:.0f} MiB); Spark sessions now start from it")
    return EXIT_OK


def cmd_contexts(args: argparse.Namespace) -> int:
    """``contexts list|show NAME|check NAME``."""
    from ledgerlens.settings import contexts  # urllib, ssl (via runtime.preflight): not at CLI start (--help)

    if args.action == "list":
        print(contexts.format_list(contexts.load()))
        return EXIT_OK
    settings = contexts.resolve(args.name)
    if not settings.context:
        raise ConfigError(f"no context named and no current context in {contexts.config_path()}")
    if args.action == "show":
        print(contexts.format_show(settings))
        return EXIT_OK
    from ledgerlens.runtime.probe import check_context  # urllib, ssl: only for 'contexts check'

    results = check_context(settings, timeout_s=args.timeout)
    print(f"context {settings.context}:")
    for line in results.lines():
        print(line)
    return EXIT_OK if results.ok else EXIT_CHECK_FAILED


def cmd_pulsar_sandbox(args: argparse.Namespace) -> int:
    """Forward to ``python -m ledgerlens_sandbox.pulsar`` (its ``main``)."""
    from ledgerlens_sandbox import pulsar  # test machinery (a Pulsar standalone): only through this command

    argv = [args.action, "--workdir", str(args.workdir)]
    if args.timeout:
        argv += ["--timeout", str(args.timeout)]
    return int(pulsar.main(argv) or 0)


def cmd_kafka_audit(args: argparse.Namespace) -> int:
    from ledgerlens.kafka.request import KafkaAuditRequest, run_request  # pyspark: when asked for

    request = KafkaAuditRequest.from_flags(vars(args))
    spark, owned = _spark_session(request.spark_master)
    try:
        run = run_request(spark, request, progress=not args.no_progress)
    finally:
        if owned:
            spark.stop()
    print(format_summary(run.summary, Path(run.out_dir), Path(run.findings_path)))
    return exit_code(run.summary, request.fail_on)


SANDBOX_AWS_DUMMY = inputs.SANDBOX_AWS_DUMMY


def apply_sandbox(args: argparse.Namespace) -> None:
    """Fill the inputs left empty from ``--sandbox DIR`` (``ledgerlens.settings.inputs.sandbox_flags``):
    addresses, the cluster's clock and thresholds, and dummy S3 credentials, exactly as the
    runbooks' ``sandbox`` parameter does. The context resolver then takes them as flags."""
    if hasattr(args, "zookeeper") and getattr(args, "sandbox", None):
        for key, value in inputs.sandbox_flags(vars(args), args.sandbox).items():
            if hasattr(args, key):
                setattr(args, key, value)
        args.sandbox = inputs.sandbox_settings(args.sandbox).workdir


def _write_metrics_failure(args: argparse.Namespace) -> None:
    try:
        _write_metrics(args, None)
    except OSError as e:  # the run's own error is the one to report
        print(f"ledgerlens {args.command}: cannot write --metrics-textfile: {e}", file=sys.stderr)


COMMANDS = {
    "audit": cmd_audit,
    "report": cmd_report,
    "lab": cmd_lab,
    "sandbox": cmd_pulsar_sandbox,
    "sandbox-local": cmd_sandbox,
    "contexts": cmd_contexts,
    "kafka-audit": cmd_kafka_audit,
    "warm-up": cmd_warm_up,
}


def _quiet(debug: bool) -> None:
    """No log noise from py4j or Spark on the console unless ``--debug``; redacted log lines."""
    from ledgerlens.runtime.spark import QUIET_ENV  # pyspark: not for --help and usage errors

    if not debug:
        os.environ.setdefault(QUIET_ENV, "1")
        for name in ("py4j", "py4j.clientserver", "py4j.java_gateway"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        # py4j reports an interrupted call with logging.exception() on the root logger (a traceback
        # on the console); the command's own output is its printed lines.
        logging.getLogger().setLevel(logging.CRITICAL + 1)
    redact_logging()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ledgerlens`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error (2), already printed by argparse
        return int(e.code) if isinstance(e.code, int) else EXIT_ERROR

    if getattr(args, "verbose", False):
        console.set_verbose(True)  # inherited by the Spark JVM and notebook kernels
    console.quiet()
    debug = bool(getattr(args, "debug", False))
    name = f"ledgerlens {args.command}"
    signals.forget()
    signals.install()
    from ledgerlens.runtime.spark import QUIET_ENV  # pyspark: not for --help and usage errors

    saved_quiet = os.environ.get(QUIET_ENV)
    saved_levels = {
        n: logging.getLogger(n).level for n in ("", "py4j", "py4j.clientserver", "py4j.java_gateway")
    }
    try:
        _quiet(debug or console.verbose())
        apply_sandbox(args)

        with console.closing_progress():  # no progress line after the command's last line
            code = {**COMMANDS, **deletion_commands.COMMANDS}[args.command](args)
        signals.raise_if_stopped()  # a signal some library swallowed: the run still stopped
        return code
    except BaseException as e:  # noqa: BLE001 - every way out is one line and an exit status
        got = signals.received()
        if got is not None or isinstance(e, KeyboardInterrupt | signals.Terminated):
            term = got == signal.SIGTERM or isinstance(e, signals.Terminated)
            _stop_children()
            print(f"{name}: {'terminated' if term else 'interrupted'}", file=sys.stderr)
            return EXIT_TERMINATED if term else EXIT_INTERRUPTED
        if isinstance(e, SystemExit):
            raise
        if debug:
            traceback.print_exc()
        _write_metrics_failure(args)
        if isinstance(e, LedgerLensError):
            print(f"{name}: error: {redact_exception(e)}", file=sys.stderr)
            return EXIT_ERROR
        print(
            f"{name}: error: internal error: {type(e).__name__}: {redact_exception(e)}"
            + ("" if debug else " (run with --debug for the traceback)"),
            file=sys.stderr,
        )
        return EXIT_INTERNAL
    finally:
        if saved_quiet is None:
            os.environ.pop(QUIET_ENV, None)
        if not _own_process():  # called in-process: as it was. The console script's libraries stay
            # quiet until the interpreter ends (an interrupted runbook's asyncio tasks log at exit)
            for logger_name, level in saved_levels.items():
                logging.getLogger(logger_name).setLevel(level)
        signals.uninstall()


def _stop_children(grace_s: float = 5.0) -> None:
    """Stop what an interrupted command started and could not stop itself: a Spark JVM interrupted
    while it was starting ignores SIGINT (pyspark starts it so) and has no handle to stop it yet."""

    def children() -> list[int]:
        out = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[1]) == os.getpid():
                out.append(int(stat.parent.name))
        return out

    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = children()
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and children() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not children():
            return


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
