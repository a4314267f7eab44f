"""Issue 42: no credential survives in a notebook papermill writes, however a runbook is run.

papermill writes the injected-parameters cell and ``metadata.papermill.parameters`` before the
runbook's first cell can refuse anything. The runs below plant a credential in a URL parameter
(userinfo ``AKIAEXAMPLE:secretvalue@``) and a parameter named like a credential, run papermill as
the README documents it (the ``papermill`` command of this environment, and ``papermill.execute_notebook``
in a fresh interpreter: papermill loads ledgerlens' redaction through its ``papermill.io`` entry
points), and search every file the run wrote for the planted values.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import uuid
from importlib.metadata import entry_points
from pathlib import Path

import nbformat
import pytest

from ledgerlens.report import papermill_redact

pytestmark = pytest.mark.notebooks

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "notebooks" / "audit_ledgers.ipynb"
PAPERMILL = Path(sys.executable).parent / "papermill"  # .venv/bin/papermill, as in the README
USERINFO = "AKIAEXAMPLE:secretvalue"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _planted() -> tuple[dict[str, str], list[str]]:
    """Runbook parameters with planted credentials, and the strings no written file may contain."""
    key = "planted-" + uuid.uuid4().hex
    port = _free_port()
    params = {
        "s3_endpoint": f"http://{USERINFO}@127.0.0.1:{port}",
        "bucket": "pulsar-offload",
        "zookeeper": f"127.0.0.1:{_free_port()}",
        "interactive": "False",
        "s3_secret_key": key,  # not a parameter of the runbook: papermill warns and injects it
    }
    return params, [USERINFO, "secretvalue", "AKIAEXAMPLE", key]


def _env(tmp_path: Path) -> dict[str, str]:
    """The kernel's own files (IPython profile, connection files) land under ``tmp_path`` too."""
    env = os.environ.copy()
    env["IPYTHONDIR"] = str(tmp_path / "ipython")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    return env


def _files_holding(root: Path, needles: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = [n for n in needles if n.encode() in data]
        if hits:
            found[str(path.relative_to(root))] = hits
    return found


def _check_refused_and_redacted(out: Path, port_url: str) -> None:
    """The notebook was written, shows the refusal, and holds the parameters masked."""
    nb = nbformat.read(str(out), as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert f's3_endpoint = "{port_url}"' in injected[0].source
    assert "s3_secret_key = ***" in injected[0].source
    recorded = nb.metadata.papermill.parameters
    assert recorded["s3_endpoint"] == port_url and recorded["s3_secret_key"] == "***"
    assert recorded["bucket"] == "pulsar-offload"  # the rest is left as given
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "ConfigError"
    assert "credentials in the URL are refused" in errors[0]["evalue"]


def _masked_url(params: dict[str, str]) -> str:
    return params["s3_endpoint"].replace(USERINFO, "***")


def test_entry_point_is_registered_and_loaded() -> None:
    import papermill.iorw

    names = {ep.name: ep.value for ep in entry_points(group="papermill.io")}
    assert names[papermill_redact.SCHEME] == "ledgerlens.report.papermill_redact:handler"
    assert papermill_redact.installed()
    papermill_redact.install()  # idempotent: one wrapper, not two
    assert papermill_redact.installed(papermill.iorw.papermill_io)
    with pytest.raises(ValueError, match="not a location"):
        papermill.iorw.papermill_io.read(papermill_redact.SCHEME + "x.ipynb")


def test_papermill_command_writes_no_secret(tmp_path: Path) -> None:
    """``.venv/bin/papermill notebooks/audit_ledgers.ipynb out.ipynb -p ...``: refused, redacted."""
    params, needles = _planted()
    params["out_dir"] = str(tmp_path / "audit-out")
    args = [str(PAPERMILL), str(RUNBOOK), "out.ipynb"]
    for name, value in params.items():
        args += ["-p", name, value]
    run = subprocess.run(
        args, cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode != 0, run.stderr[-3000:]  # the runbook refuses credentials in a URL
    assert "credentials in the URL are refused" in run.stderr
    assert "Passed unknown parameter: s3_secret_key" in run.stderr
    _check_refused_and_redacted(tmp_path / "out.ipynb", _masked_url(params))
    assert not (tmp_path / "audit-out").exists()  # refused before anything else was written
    assert _files_holding(tmp_path, needles) == {}
    assert [n for n in needles if n in run.stdout + run.stderr] == []


def test_papermill_api_writes_no_secret(tmp_path: Path) -> None:
    """``papermill.execute_notebook`` in a fresh interpreter that imports nothing of ledgerlens."""
    params, needles = _planted()
    params["out_dir"] = str(tmp_path / "audit-out")
    params["interactive"] = False  # type: ignore[assignment]
    script = textwrap.dedent(
        f"""
        import json, sys
        import papermill
        from papermill.exceptions import PapermillExecutionError
        try:
            papermill.execute_notebook({str(RUNBOOK)!r}, "out.ipynb", parameters=json.loads(sys.argv[1]),
                                       progress_bar=False)
        except PapermillExecutionError as e:
            print("refused:", e.ename)
            sys.exit(3)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, json.dumps(params)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 3, run.stderr[-3000:]
    assert "refused: ConfigError" in run.stdout
    _check_refused_and_redacted(tmp_path / "out.ipynb", _masked_url(params))
    assert not (tmp_path / "audit-out").exists()
    assert _files_holding(tmp_path, needles) == {}


def test_every_runbook_prepared_without_secrets(tmp_path: Path) -> None:
    """``--prepare-only`` (no kernel) writes the parameterized notebook of each runbook: redacted too."""
    params, needles = _planted()
    runbooks = sorted(str(p) for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert len(runbooks) >= 5
    script = textwrap.dedent(
        """
        import json, pathlib, sys
        import papermill
        for nb in json.loads(sys.argv[1]):
            out = pathlib.Path(nb).name
            papermill.execute_notebook(nb, out, parameters=json.loads(sys.argv[2]), prepare_only=True)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, json.dumps(runbooks), json.dumps(params)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for name in (Path(p).name for p in runbooks):
        recorded = nbformat.read(str(tmp_path / name), as_version=4).metadata.papermill.parameters
        assert recorded["s3_endpoint"] == _masked_url(params) and recorded["s3_secret_key"] == "***", name
    assert _files_holding(tmp_path, needles) == {}


@pytest.mark.filterwarnings("ignore:the file is not specified with any extension")
def test_stdout_destination_is_redacted(capfdbinary: pytest.CaptureFixture[bytes]) -> None:
    """``papermill in.ipynb -``: the notebook on stdout goes through the same write."""
    import papermill

    params, needles = _planted()
    papermill.execute_notebook(str(RUNBOOK), "-", parameters=params, prepare_only=True, progress_bar=False)
    out = capfdbinary.readouterr().out.decode()
    assert '"s3_secret_key": "***"' in out and _masked_url(params) in out
    assert [n for n in needles if n in out] == []


def test_clean_notebooks_are_written_as_papermill_writes_them(tmp_path: Path) -> None:
    """Nothing to redact: the very bytes papermill made. Something to redact: nbformat's layout."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('zookeeper = "zk1:2181/pulsar"\nx = 1')])
    nb.metadata["papermill"] = {"parameters": {"zookeeper": "zk1:2181/pulsar", "max_tokens": 5}}
    clean = nbformat.writes(nb)
    assert papermill_redact.redact_notebook_text(clean) is clean
    nb.cells[0].source = 'admin_token = "eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl"\nx = 1'
    nb.metadata["papermill"]["parameters"]["admin_token"] = "hunter2hunter2"
    written = papermill_redact.redact_notebook_text(nbformat.writes(nb))
    assert "hunter2" not in written and "eyJ" not in written
    again = nbformat.reads(written, as_version=4)
    assert again.metadata.papermill.parameters == {
        "zookeeper": "zk1:2181/pulsar",
        "max_tokens": 5,
        "admin_token": "***",
    }
    assert written == nbformat.writes(again)  # nbformat's own layout
    assert papermill_redact.redact_notebook_text("not json token=abc") == "not json token=***"


def test_unchanged_cells_are_not_redacted_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """papermill writes the notebook after every cell: a completed cell is redacted once."""
    calls: list[object] = []
    real = papermill_redact.redact_notebook

    def counting(nb: dict[str, object]) -> dict[str, object]:
        calls.append(nb)
        return real(nb)

    monkeypatch.setattr(papermill_redact, "redact_notebook", counting)
    big = nbformat.v4.new_code_cell("show()")
    big.outputs = [nbformat.v4.new_output("stream", name="stdout", text="https://K:S@h\n" + "x" * 100_000)]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('token = "abcdefgh"'), big])
    first = papermill_redact.redact_notebook_text(nbformat.writes(nb))
    nb.cells.append(nbformat.v4.new_code_cell("y = 2"))
    second = papermill_redact.redact_notebook_text(nbformat.writes(nb))
    assert len(calls) == 2 + 2 + 1  # metadata and 2 cells, then metadata and the new cell only
    assert "K:S@" not in second and "abcdefgh" not in second and second.startswith(first[:200])
    monkeypatch.setenv("LEDGERLENS_TEST_SECRET", "y" * 20)  # a new secret value: everything again
    papermill_redact.redact_notebook_text(nbformat.writes(nb))
    assert len(calls) == 5 + 4
