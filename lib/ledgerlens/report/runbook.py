"""Run a runbook headless and turn it into a shareable report.

- ``execute_runbook``: papermill executes a parameterized notebook into an output notebook.
- ``record`` / ``read_recorded``: a notebook records a result in its outputs; read it back.
- ``to_html``: nbconvert the executed notebook into one self-contained HTML file (no CDN, no
  runbook instructions, no stderr).

Credentials never appear in a report: the executed notebook and the HTML pass through
``ledgerlens.settings.redact.redact`` before they are written (URL userinfo, tokens, keys, the values of
secret environment variables); ``check_no_secrets`` refuses runbook parameters that hold a secret.
papermill itself, however it is run (the ``papermill`` command, ``papermill.execute_notebook``),
writes every notebook redacted: ``ledgerlens.report.papermill_redact``, loaded through papermill's
``papermill.io`` entry points.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ledgerlens.errors import LedgerLensError
from ledgerlens.settings.redact import leaked_names, redact, redact_html, redact_notebook
from ledgerlens.settings.redact import secret_values as secret_values

RECORD_KEY = "ledgerlens"
"""Output metadata key that marks a recorded result: ``{"ledgerlens": <name>}``."""

RECORD_MIME = "application/vnd.ledgerlens.record+json"
"""The MIME type of recorded results: no front end renders it, so a record is data in the output
notebook, not a JSON tree on the page (``application/json``, as older notebooks recorded, is read too)."""

INSTRUCTIONS_TAG = "instructions"
"""Cells with this tag speak to the person running the notebook; reports leave them out."""


class ReportError(LedgerLensError):
    """The runbook could not be executed, read back or converted."""


class SecretLeakError(ReportError):
    """A secret's value appears in a notebook or report. The message names the variable, never the value."""


def _kernel_config(sockets: str, stderr: IO[bytes] | None = None) -> Any:
    """Kernels talk to papermill over local IPC sockets: nothing on the network, no TCP warning. The
    sockets go in the directory ``sockets`` (by default Jupyter makes them in the working directory,
    and a kernel that is interrupted leaves them there). ``stderr``: where the kernel process's own
    stderr goes (what it writes outside the notebook's streams: a kernel shut down mid-cell logs
    its pending tasks there); by default this process's."""
    from jupyter_client.manager import AsyncKernelManager  # Jupyter: only when a kernel runs
    from traitlets.config import Config

    class _KernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            if stderr is not None:
                kw.setdefault("stderr", stderr)
            await super()._async_launch_kernel(kernel_cmd, **kw)

    config = Config()
    config.KernelManager.transport = "ipc"
    config.KernelManager.ip = os.path.join(sockets, "kernel")
    config.NotebookClient.kernel_manager_class = _KernelManager
    return config


HEADLESS_ENV = "LEDGERLENS_HEADLESS"
"""Set in the environment of kernels that ``execute_runbook`` starts: no front end, no widgets."""


def live_kernel() -> bool:
    """True inside an IPython kernel that is not driven by papermill (widgets have a front end)."""
    if os.environ.get(HEADLESS_ENV):
        return False
    try:
        from IPython import get_ipython  # IPython: only asked whether a kernel runs this
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    try:
        parent = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return True
    return b"papermill" not in parent


# --- recording results in the output notebook ---------------------------------------------------------


def record(name: str, value: Any) -> None:
    """Display ``value`` (JSON-able) as a ``RECORD_MIME`` output tagged ``{"ledgerlens": name}``.

    Called from a notebook; nothing shows on the page (no front end renders ``RECORD_MIME``), and
    papermill keeps the output in the executed notebook, where ``read_recorded`` finds it again.
    """
    from IPython.display import display  # IPython: only inside a notebook's kernel

    data = json.loads(json.dumps(value, default=str))
    display({RECORD_MIME: data}, raw=True, metadata={RECORD_MIME: {RECORD_KEY: name}})


def read_recorded(nb_path: str | Path, name: str = "summary") -> Any:
    """The value a notebook recorded under ``name`` (the last one, when recorded more than once)."""
    import nbformat  # nbformat: only when a notebook is read back

    nb = nbformat.read(str(nb_path), as_version=4)
    found: list[Any] = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            meta = output.get("metadata", {})
            for mime in (RECORD_MIME, "application/json"):
                tag = (meta.get(mime) or {}).get(RECORD_KEY, meta.get(RECORD_KEY))
                if tag == name and mime in data:
                    value = data[mime]
                    found.append(json.loads(value) if isinstance(value, str) else value)
                    break
    if not found:
        raise ReportError(f"{nb_path}: no output recorded as {name!r} (did the notebook run to the end?)")
    return found[-1]


# --- secrets ---------------------------------------------------------------------------------------


def check_no_secrets(text: str, where: str, env: Mapping[str, str] | None = None) -> None:
    """Raise ``SecretLeakError`` naming the variable (never its value) if a secret appears in ``text``."""
    leaked = leaked_names(text, env)
    if leaked:
        raise SecretLeakError(
            f"{where}: contains the value of environment variable(s) {', '.join(leaked)}; "
            "refusing to publish it (credentials must come from the environment, never be printed)"
        )
    if redact(text, env) != text:
        raise SecretLeakError(
            f"{where}: contains a credential (URL userinfo, token, key or password); "
            "credentials come from the environment or config files, never parameters"
        )


def relocate_notebook(path: str | Path, staging: str | Path, final: str | Path) -> Path:
    """Rewrite the notebook ``path`` so that paths under ``staging`` read as under ``final`` (where
    the run's results are published, ``ledgerlens.runtime.outdir``)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    moved = text.replace(str(Path(staging)), str(Path(final)))
    if moved != text:
        path.write_text(moved, encoding="utf-8")
    return path


def redact_notebook_file(path: str | Path) -> Path:
    """Rewrite the notebook ``path`` with every credential redacted (``ledgerlens.settings.redact``)."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    clean = redact_notebook(nb)
    if clean != nb:
        path.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# --- papermill and nbconvert -----------------------------------------------------------------------


def execute_runbook(
    notebook: str | Path,
    output: str | Path,
    parameters: Mapping[str, Any],
    *,
    kernel_name: str | None = None,
    cwd: str | Path | None = None,
    progress: bool | Any = False,
    kernel_stderr: str | Path | None = None,
) -> Path:
    """Execute ``notebook`` with papermill into ``output``; returns ``output``.

    ``kernel_name`` defaults to the notebook's own kernelspec (``python3``: the running environment's
    ipykernel). ``progress``: the kernel's stderr (the runbook's progress lines) is copied to this
    process's stderr, or to ``progress`` when it is a file, as it comes. The kernel runs with
    ``LEDGERLENS_HEADLESS=1`` (no widgets). A failing cell raises ``ReportError`` naming the cell
    and the error; the partly executed notebook is kept at ``output`` for inspection.
    ``kernel_stderr``: a file for the kernel process's own stderr (what it writes outside the
    notebook's streams), rewritten; by default it is this process's stderr.
    """
    import papermill as pm  # papermill: only when a runbook is executed
    from papermill.exceptions import PapermillExecutionError

    from ledgerlens.report.papermill_redact import install  # imports papermill: it installs itself on import

    install()  # loaded by papermill's entry points already, unless ledgerlens' metadata is stale
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    check_no_secrets(json.dumps(dict(parameters), default=str), "runbook parameters")
    headless_before = os.environ.get(HEADLESS_ENV)
    os.environ[HEADLESS_ENV] = "1"  # inherited by the kernel papermill starts
    sockets = tempfile.mkdtemp(prefix="ledgerlens-kernel-")
    kernel_log = None
    if kernel_stderr is not None:
        Path(kernel_stderr).parent.mkdir(parents=True, exist_ok=True)
        kernel_log = open(kernel_stderr, "wb")  # noqa: SIM115 - open while the kernel runs, closed below
    try:
        pm.execute_notebook(
            str(notebook),
            str(output),
            parameters=dict(parameters),
            kernel_name=kernel_name,
            progress_bar=False,
            # the kernel's progress lines, as they come: to stderr, or to the file given (a relay)
            stderr_file=(sys.stderr if progress is True else progress or None),
            config=_kernel_config(sockets, kernel_log),
            cwd=str(cwd) if cwd is not None else None,
        )
    except PapermillExecutionError as e:
        if output.is_file():
            redact_notebook_file(output)
        first = (str(e.evalue).strip().splitlines() or [""])[0]
        raise ReportError(
            f"{notebook}: cell {e.exec_count} failed: {e.ename}: {first} (details in {output})"
        ) from e
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
        if kernel_log is not None:
            kernel_log.close()
        if headless_before is None:
            os.environ.pop(HEADLESS_ENV, None)
        else:
            os.environ[HEADLESS_ENV] = headless_before
    return redact_notebook_file(output)


# Blocks of nbconvert's ``lab`` template that load scripts from public CDNs: the report must open
# offline (figures embed plotly.js themselves) and must not phone home.
_OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
"""
_EXTERNAL_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//[^>]*>\s*</script>""", re.I)


def external_scripts(html: str) -> list[str]:
    """Every ``<script src=...>`` tag that loads from the network."""
    return _EXTERNAL_SCRIPT.findall(html)


def to_html(
    notebook: str | Path,
    html: str | Path,
    *,
    exclude_input: bool = True,
    keep_stderr: bool = False,
    title: str = "",
) -> Path:
    """Convert an executed notebook into one self-contained HTML file; returns ``html``.

    Figures come as HTML in the outputs: inline SVG (``figures.use_offline_renderer(static=True)``)
    or plotly's own with plotly.js inlined once; nothing is fetched from the network.
    Scripts from CDNs (require.js, MathJax, mermaid, widget manager) are left out, widget state is
    dropped (widgets need a live kernel), cells tagged ``instructions`` (the runbook's words to
    the person running it) are left out, code cells are hidden unless ``exclude_input=False``, and
    stderr streams (Spark's log and progress lines) are left out unless ``keep_stderr=True`` (the
    executed notebook keeps everything). Credentials are redacted (``ledgerlens.settings.redact``).
    """
    import nbformat  # nbformat, jinja2, nbconvert: only when a report is exported
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    notebook, html = Path(notebook), Path(html)
    text = json.dumps(redact_notebook(json.loads(notebook.read_text(encoding="utf-8"))))
    nb = nbformat.reads(text, as_version=4)
    nb.metadata.pop("widgets", None)
    nb.cells = [c for c in nb.cells if INSTRUCTIONS_TAG not in c.get("metadata", {}).get("tags", [])]
    if not keep_stderr:
        for cell in nb.cells:
            if "outputs" in cell:
                cell.outputs = [
                    o
                    for o in cell.outputs
                    if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
                ]
    if title:
        nb.metadata["title"] = title
    exporter = HTMLExporter(
        extra_loaders=[DictLoader({"ledgerlens_report.html.j2": _OFFLINE_TEMPLATE})],
        template_file="ledgerlens_report.html.j2",
        exclude_input=exclude_input,
        exclude_input_prompt=exclude_input,
        exclude_output_prompt=exclude_input,
    )
    with warnings.catch_warnings():  # recorded results (RECORD_MIME) have no HTML form, on purpose
        warnings.filterwarnings("ignore", message=".*is not able to be represented", category=UserWarning)
        body, _resources = exporter.from_notebook_node(
            nb, resources={"metadata": {"name": title or notebook.stem}}
        )
    body = redact_html(_EXTERNAL_SCRIPT.sub("", body))
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(body, encoding="utf-8")
    return html
