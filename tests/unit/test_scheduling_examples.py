"""The scheduling examples of docs/scheduling.md are the files in docs/scheduling/, and they work.

- cron: the crontab parsed the way cron parses it (variables, five time fields, the command; no
  ``\\`` continuation, no unescaped ``%``), its job run with ``/bin/sh -c`` in cron's environment
  with a ``ledgerlens`` on PATH that exits 0, 3, 2, 130 and a ``mail`` that records each mail:
  0 sends nothing, 3 one mail about new findings, anything else one mail saying the audit could not
  run, and nothing escapes to cron's own mail.
- systemd: the unit and the timer read by a strict reader (a ``#`` after a value is part of the
  value in systemd, so none may be there; ``%`` is a specifier) and by ``systemd-analyze verify``
  (Debian's systemd, installed by ``make system-deps``): no warning at all.
- Kubernetes: the CronJob parses as YAML; exit 3 fails the Job without a retry.
- Every ``ledgerlens`` command line in them is accepted by the real argument parser.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ledgerlens import cli

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "scheduling"
CRONTAB = EXAMPLES / "ledgerlens.cron"
SERVICE = EXAMPLES / "ledgerlens-audit.service"
TIMER = EXAMPLES / "ledgerlens-audit.timer"
CRONJOB = EXAMPLES / "ledgerlens-audit-cronjob.yaml"
VENV_BIN = "/opt/ledgerlens/.venv/bin"  # where the examples' ledgerlens is installed

# --- cron -------------------------------------------------------------------------------------------

_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_ENV_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
MAX_COMMAND = 1000  # Debian's cron (cron.h): longer commands are cut


def _cron_field(text: str, name: str, low: int, high: int) -> None:
    for part in text.split(","):
        base, _, step = part.partition("/")
        assert not step or step.isdigit(), f"{name}: bad step in {text!r}"
        if base == "*":
            continue
        first, _, last = base.partition("-")
        for value in (first, last) if last else (first,):
            assert value.isdigit() and low <= int(value) <= high, f"{name}: {value!r} not in {low}-{high}"


def parse_crontab(text: str) -> tuple[dict[str, str], list[tuple[list[str], str, str]]]:
    """A user crontab as cron reads it: its variables and its jobs (time fields, command, stdin)."""
    assert text.endswith("\n"), "cron ignores a last line without a newline"
    env: dict[str, str] = {}
    jobs: list[tuple[list[str], str, str]] = []
    for number, line in enumerate(text.split("\n")[:-1], 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assert not line.rstrip().endswith("\\"), f"line {number}: cron has no '\\' continuation lines"
        m = _ENV_LINE.match(line)
        if m:
            value = m.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[m.group(1)] = value
            continue
        parts = line.split(None, 5)
        assert len(parts) == 6, f"line {number}: five time fields and a command expected: {line!r}"
        for text_field, (name, low, high) in zip(parts[:5], _FIELDS, strict=True):
            _cron_field(text_field, name, low, high)
        command = parts[5]
        # cron: the first unescaped % ends the command (the rest is its stdin, % as newlines); \% is %
        pieces = re.split(r"(?<!\\)%", command)
        command, stdin = pieces[0].replace("\\%", "%"), "\n".join(pieces[1:])
        jobs.append((parts[:5], command, stdin))
    return env, jobs


STUB_LEDGERLENS = """#!{python}
import json, os, sys
with open(os.environ["STUB_CALLS"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
code = int(os.environ["STUB_EXIT"])
print("[  0%   0.4 s] starting Spark (local[*])", file=sys.stderr, flush=True)
if code in (0, 3):
    print("report:   /var/lib/ledgerlens/audit/report.html", flush=True)
    print("ledgerlens: 1 critical, 2 warning, 0 info (3 findings, 1.0 MiB); 1 new, 0 resolved since "
          "2026-11-27 03:15 UTC; report: /var/lib/ledgerlens/audit/report.html", flush=True)
else:
    print("ledgerlens report: error: zookeeper zk1:2181: connection refused", file=sys.stderr, flush=True)
sys.exit(code)
"""

STUB_MAIL = """#!{python}
import json, os, sys
with open(os.environ["STUB_MAILS"], "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "body": sys.stdin.read()}}) + "\\n")
"""


def _stub(directory: Path, name: str, text: str) -> None:
    path = directory / name
    path.write_text(text.format(python=sys.executable))
    path.chmod(0o755)


def _run_cron_job(tmp_path: Path, exit_code: int) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    env_lines, jobs = parse_crontab(CRONTAB.read_text())
    ((_times, command, stdin),) = jobs
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "ledgerlens", STUB_LEDGERLENS)
    _stub(bin_dir, "mail", STUB_MAIL)
    home = tmp_path / "home"
    home.mkdir()
    # cron's environment: its defaults, then the crontab's variables; the install and log
    # directories of the example mapped into this test's directory
    env = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin", "HOME": str(home), "LOGNAME": "ledgerlens"}
    for key, value in env_lines.items():
        env[key] = value.replace(VENV_BIN, str(bin_dir)).replace("/var/log/ledgerlens", str(tmp_path))
    assert env["PATH"].split(":")[0] == str(bin_dir), "the crontab's PATH must lead to the venv's ledgerlens"
    env.update(
        STUB_EXIT=str(exit_code), STUB_CALLS=str(tmp_path / "calls"), STUB_MAILS=str(tmp_path / "mails")
    )
    done = subprocess.run(
        [env["SHELL"], "-c", command],
        input=stdin,
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
    )
    mails = tmp_path / "mails"
    sent = [json.loads(line) for line in mails.read_text().splitlines()] if mails.exists() else []
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert len(calls) == 1
    argv = cli.build_parser().parse_args(calls[0])  # the real parser takes what cron passes
    assert argv.fail_on == "new-critical" and argv.out == "/var/lib/ledgerlens/audit"  # one --out: history
    return done, sent


def test_crontab_is_what_cron_reads() -> None:
    env, jobs = parse_crontab(CRONTAB.read_text())
    assert len(jobs) == 1, "one job"
    ((times, command, stdin),) = jobs
    assert times == ["15", "3", "*", "*", "*"]
    assert stdin == "" and "%" not in command, "an unescaped % would cut the command at a newline"
    assert len(command) < MAX_COMMAND
    assert env["SHELL"] == "/bin/sh" and env["MAILTO"]
    assert "$(date" not in command, "a dated --out never finds the previous run"


def test_cron_job_clean_run_mails_nothing(tmp_path: Path) -> None:
    done, sent = _run_cron_job(tmp_path, 0)
    assert done.returncode == 0 and sent == []
    assert done.stdout == done.stderr == ""  # nothing for cron to mail either
    log = (tmp_path / "audit.log").read_text()
    assert "starting Spark" in log and log.splitlines()[-1].startswith("ledgerlens: 1 critical")


def test_cron_job_new_findings_mail_once(tmp_path: Path) -> None:
    done, sent = _run_cron_job(tmp_path, 3)
    assert done.stdout == done.stderr == ""
    assert len(sent) == 1
    ((mail),) = sent
    subject = mail["argv"][mail["argv"].index("-s") + 1]
    assert "new critical findings" in subject and "could not run" not in subject
    assert mail["argv"][-1] == "oncall@example.com"
    assert mail["body"].startswith("ledgerlens: 1 critical, 2 warning") and "report.html" in mail["body"]


@pytest.mark.parametrize("code", [2, 1, 130, 143])
def test_cron_job_that_could_not_run_mails_once(tmp_path: Path, code: int) -> None:
    done, sent = _run_cron_job(tmp_path, code)
    assert done.stdout == done.stderr == ""
    assert len(sent) == 1
    ((mail),) = sent
    subject = mail["argv"][mail["argv"].index("-s") + 1]
    assert "the audit could not run" in subject and f"(exit {code})" in subject and "findings" not in subject
    assert "ledgerlens report: error: zookeeper zk1:2181: connection refused" in mail["body"]


# --- systemd ----------------------------------------------------------------------------------------

_KEYS = {
    "Unit": {"Description", "Wants", "After", "Requires", "OnFailure", "Documentation"},
    "Service": {
        "Type",
        "User",
        "Group",
        "StateDirectory",
        "WorkingDirectory",
        "EnvironmentFile",
        "Environment",
        "ExecStart",
        "SuccessExitStatus",
        "TimeoutStartSec",
        "PrivateTmp",
        "NoNewPrivileges",
        "ProtectSystem",
    },  # fmt: skip
    "Timer": {"OnCalendar", "RandomizedDelaySec", "Persistent", "AccuracySec"},
    "Install": {"WantedBy"},
}
_SPECIFIER = re.compile(r"%[^%nNpPiIjJfhuUgGsmMbBHlvtTSCLESEdVo]")  # %% and systemd's specifiers


def read_unit(path: Path) -> dict[str, dict[str, str]]:
    """A unit file read strictly: comments on lines of their own, continuation lines joined, only
    known keys, no value that a trailing comment or a stray % would change."""
    sections: dict[str, dict[str, str]] = {}
    section = ""
    logical: list[str] = []
    pending = ""
    for line in path.read_text().splitlines():
        if pending:
            pending += " " + line.strip()
        elif not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        else:
            pending = line.strip()
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        logical.append(pending)
        pending = ""
    assert not pending, "a continuation at the end of the file"
    for line in logical:
        if line.startswith("["):
            section = line.strip("[]")
            assert section in _KEYS, f"{path.name}: unknown section [{section}]"
            sections[section] = {}
            continue
        key, eq, value = line.partition("=")
        assert eq and section, f"{path.name}: not KEY=value in a section: {line!r}"
        assert key in _KEYS[section], f"{path.name}: [{section}] {key} is not a key this example should need"
        assert not re.search(r"\s[#;]", value), (
            f"{path.name}: {key}= has a trailing comment: it is in the value"
        )
        assert not _SPECIFIER.search(value), f"{path.name}: {key}= has a % systemd would expand (write %%)"
        sections[section][key] = value
    return sections


def test_service_unit_reads_as_written() -> None:
    unit = read_unit(SERVICE)
    service = unit["Service"]
    assert re.fullmatch(r"-?/[^\s]+", service["EnvironmentFile"]), "one absolute path, nothing after it"
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == f"{VENV_BIN}/ledgerlens"
    parsed = cli.build_parser().parse_args(argv[1:])
    assert parsed.fail_on == "new-critical" and parsed.out.startswith("/var/lib/ledgerlens/")
    assert service["SuccessExitStatus"] == "3" and service["Type"] == "oneshot"
    assert not any(a.startswith(("AWS_", "--aws-secret")) for a in argv), (
        "credentials only in EnvironmentFile"
    )


def test_timer_reads_as_written() -> None:
    timer = read_unit(TIMER)
    assert (
        timer["Timer"]["OnCalendar"] == "*-*-* 03:15:00 UTC"
        and timer["Install"]["WantedBy"] == "timers.target"
    )


def test_systemd_verifies_the_unit_and_the_timer(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze not found: install Debian's systemd (make system-deps)"
    stub = tmp_path / "ledgerlens"  # verify checks that ExecStart's program exists and is executable
    _stub(tmp_path, "ledgerlens", STUB_LEDGERLENS)
    (tmp_path / SERVICE.name).write_text(SERVICE.read_text().replace(f"{VENV_BIN}/ledgerlens", str(stub)))
    shutil.copy(TIMER, tmp_path / TIMER.name)
    done = subprocess.run(
        [analyze, "verify", str(tmp_path / SERVICE.name), str(tmp_path / TIMER.name)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYSTEMD_LOG_COLOR": "0"},
    )
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_systemd_verify_catches_what_the_strict_reader_does_not(tmp_path: Path) -> None:
    """The check above can fail: a missing program or an unknown key is reported."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze not found: install Debian's systemd (make system-deps)"
    broken = tmp_path / SERVICE.name
    broken.write_text(SERVICE.read_text().replace("TimeoutStartSec=", "TimeoutStartSecs="))
    done = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert "TimeoutStartSecs" in said and "is not executable" in said


def test_a_trailing_comment_is_refused(tmp_path: Path) -> None:
    """systemd would read '/etc/ledgerlens/aws.env   # AWS_...' as the file's name."""
    bad = tmp_path / "bad.service"
    bad.write_text(SERVICE.read_text().replace("/etc/ledgerlens/aws.env", "/etc/ledgerlens/aws.env  # keys"))
    with pytest.raises(AssertionError, match="trailing comment"):
        read_unit(bad)


# --- Kubernetes ---------------------------------------------------------------------------------------


def test_cronjob_parses_and_does_not_retry_findings() -> None:
    job = yaml.safe_load(CRONJOB.read_text())
    assert job["kind"] == "CronJob" and job["spec"]["concurrencyPolicy"] == "Forbid"
    assert len(job["spec"]["schedule"].split()) == 5 and job["spec"]["timeZone"]
    spec = job["spec"]["jobTemplate"]["spec"]
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy requires it
    ((rule,),) = [spec["podFailurePolicy"]["rules"]]
    # Ignore would start the pod again (an audit loop): exit 3 ends the Job, without a retry
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [3]
    ((container,),) = [pod["containers"]]
    assert rule["onExitCodes"]["containerName"] == container["name"]
    parsed = cli.build_parser().parse_args([str(a) for a in container["args"]])
    assert parsed.fail_on == "new-critical" and parsed.out == "/reports/audit"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert (
        Path(parsed.out).parent.as_posix() in mounts
        and Path(parsed.metrics_textfile).parent.as_posix() in mounts
    )


# --- the page shows the files ---------------------------------------------------------------------------


def test_docs_show_exactly_the_files() -> None:
    """Each example appears in docs/scheduling.md once, as a code block right after its link."""
    text = (DOCS / "scheduling.md").read_text()
    blocks = re.findall(r"\]\(scheduling/([^)]+)\)[^\n]*\n+```[a-z]*\n(.*?)```", text, flags=re.S)
    shown = dict(blocks)
    files = sorted(p.name for p in EXAMPLES.iterdir())
    assert sorted(shown) == files and len(blocks) == len(files)
    for name in files:
        assert shown[name] == (EXAMPLES / name).read_text(), name
