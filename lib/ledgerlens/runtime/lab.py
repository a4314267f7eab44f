"""``ledgerlens lab``: JupyterLab on a scratch copy of the runbooks.

The committed runbooks (``notebooks/*.ipynb``) stay clean: JupyterLab opens copies in a work
directory, so autosave writes outputs there and never into the repository. With ``sandbox`` the
copies' ``sandbox`` parameter is filled in, so *Run All* audits the sandbox exactly as
``ledgerlens report --sandbox DIR`` does. Widget state is saved with the notebook (JupyterLab's
``saveState``), JupyterLab's news and update checks are off (no requests leave the machine), and
``--allow-root`` is passed when running as root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from ledgerlens.errors import ConfigError

RUNBOOKS_DIR = Path(__file__).resolve().parents[3] / "notebooks"

SETTINGS = {
    "@jupyter-widgets/jupyterlab-manager/plugin.jupyterlab-settings": {"saveState": True},
    # every cell's outputs in the page: widgets are restored from the live kernel after a reload
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}
"""JupyterLab user settings written into the scratch directory (never the user's own)."""

_SANDBOX_LINE = re.compile(r'^(sandbox: str = )"[^"\n]*"', re.M)


def prepare(
    workdir: str | Path, *, sandbox: str = "", fresh: bool = False, runbooks: Path = RUNBOOKS_DIR
) -> Path:
    """Copy the runbooks into ``workdir`` (existing copies are kept unless ``fresh``), fill their
    ``sandbox`` parameter, write JupyterLab settings; returns the work directory (absolute)."""
    work = Path(workdir).resolve()
    if not runbooks.is_dir():
        raise ConfigError(f"runbooks not found at {runbooks}")
    work.mkdir(parents=True, exist_ok=True)
    sandbox_abs = str(Path(sandbox).resolve()) if sandbox else ""
    if sandbox_abs and not (Path(sandbox_abs) / "state.json").is_file():
        raise ConfigError(
            f"sandbox {sandbox}: no state.json; start it with 'ledgerlens sandbox-local up' first"
        )
    for source in sorted(runbooks.glob("*.ipynb")):
        target = work / source.name
        if target.exists() and not fresh:
            continue
        shutil.copyfile(source, target)
        if sandbox_abs:
            set_sandbox_parameter(target, sandbox_abs)
    settings = work / ".jupyter-settings"
    for name, values in SETTINGS.items():
        path = settings / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2) + "\n")
    return work


def set_sandbox_parameter(notebook: Path, sandbox: str) -> None:
    """Set ``sandbox: str = "<sandbox>"`` in the notebook's parameters cell."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        new = _SANDBOX_LINE.sub(lambda m: m.group(1) + json.dumps(sandbox), src)
        cell["source"] = new.splitlines(keepends=True)
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def command(
    workdir: Path, *, port: int = 8888, token: str | None = None, open_browser: bool = False
) -> list[str]:
    """The ``jupyter lab`` command line for a prepared work directory."""
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={workdir}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--LabApp.user_settings_dir={workdir / '.jupyter-settings'}",
        f"--LabApp.workspaces_dir={workdir / '.jupyter-workspaces'}",
        "--KernelManager.transport=ipc",  # kernels on local sockets, not TCP
    ]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        argv.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")
    return argv


def environment() -> dict[str, str]:
    """The server's environment: this interpreter for Spark workers, no debugger start-up warnings."""
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    return env
