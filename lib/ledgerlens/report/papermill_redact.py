"""Every notebook papermill writes is redacted first, however papermill is run.

papermill writes the output notebook before the runbook's first cell runs: the injected-parameters
cell and ``metadata.papermill.parameters`` hold every ``-p`` value as given. A runbook refuses a
credential (``s3_endpoint`` with ``KEY:SECRET@``) only when its cell runs, too late for that file.

ledgerlens registers this module in papermill's ``papermill.io`` entry-point group
(``pyproject.toml``). papermill loads the group whenever it is imported (``papermill.iorw``): the
``papermill`` command, ``papermill.execute_notebook``, ``ledgerlens report``. Loading this module
wraps ``papermill.iorw.papermill_io.write``, the one method every notebook papermill writes goes
through (``write_ipynb``: the engine's save after each cell, the notebook with the error banner,
the final notebook, ``--prepare-only``; every destination: files, ``-`` (stdout), ``s3://``, ...),
so that it writes ``redact_notebook_text(buf)``. Only what is written changes; the kernel executes
the parameters as given (a runbook still sees, and refuses, the credential).

Not an engine: papermill runs the engine registered without a name unless ``--engine`` names one,
and an entry point cannot replace that one (one named ``nbclient`` replaces only ``--engine
nbclient``); ``execute_notebook`` also writes the error and final notebooks itself, outside the
engine. Not an I/O handler for ``local``: for a path no scheme matches, papermill uses the local
handler it registered first, whatever entry points add.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any, NoReturn

from ledgerlens.settings.redact import literal_secrets, redact, redact_notebook, redact_obj

SCHEME = "ledgerlens+redact://"
"""The name of ledgerlens' ``papermill.io`` entry point (a scheme prefix to papermill): not a location."""

_WRAPPED = "_ledgerlens_redacts"

# nbformat's own JSON layout (nbformat.v4.nbjson): a notebook that changes is written as nbformat would.
_NBFORMAT_JSON: dict[str, Any] = {
    "indent": 1,
    "sort_keys": True,
    "separators": (",", ": "),
    "ensure_ascii": False,
}


class _CellCache:
    """Redacted cells of the last notebook written, by their JSON: papermill writes the notebook
    again after every cell, and redacting a few MB of inline plotly.js takes seconds; a cell that
    did not change since (every completed one) is not redacted again."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.secrets: frozenset[str] = frozenset()
        self.cells: dict[str, tuple[Any, bool]] = {}

    def redact_cells(self, cells: list[Any]) -> tuple[list[Any], bool]:
        """``cells`` redacted, and whether any of them changed."""
        secrets = literal_secrets()
        with self.lock:
            known = self.cells if secrets == self.secrets else {}
        fresh: dict[str, tuple[Any, bool]] = {}
        out: list[Any] = []
        changed = False
        for cell in cells:
            key = json.dumps(cell, sort_keys=True)
            hit = fresh.get(key) or known.get(key)
            if hit is None:
                clean = redact_notebook(cell) if isinstance(cell, dict) else redact_obj(cell)
                hit = (clean, clean != cell)
            fresh[key] = hit
            out.append(hit[0])
            changed = changed or hit[1]
        with self.lock:
            self.secrets, self.cells = secrets, fresh
        return out, changed


_CELLS = _CellCache()


def redact_notebook_text(buf: str) -> str:
    """A serialized notebook (as papermill writes it) with every credential redacted
    (``ledgerlens.settings.redact.redact_notebook``); ``buf`` itself when there is nothing to redact."""
    try:
        nb = json.loads(buf)
    except ValueError:
        return redact(buf)  # not JSON: redacted as text
    if not isinstance(nb, dict):
        return redact(buf)
    cells = nb.get("cells")
    rest = {k: v for k, v in nb.items() if k != "cells"}
    clean = redact_notebook(rest)
    changed = clean != rest
    if isinstance(cells, list):
        clean["cells"], cells_changed = _CELLS.redact_cells(cells)
        changed = changed or cells_changed
    elif "cells" in nb:
        clean["cells"] = redact_obj(cells)
        changed = changed or clean["cells"] != cells
    if not changed:
        return buf
    text = json.dumps(clean, **_NBFORMAT_JSON)
    return text + "\n" if buf.endswith("\n") else text


def _papermill_io() -> Any:
    # while papermill imports its entry points, papermill.iorw is half imported: papermill_io exists
    from papermill.iorw import papermill_io  # papermill: heavy, and it imports this module as it loads

    return papermill_io


def install(io: Any = None) -> None:
    """Make ``io`` (papermill's ``papermill_io`` by default) write every notebook redacted; idempotent."""
    io = _papermill_io() if io is None else io
    write = io.write
    if getattr(write, _WRAPPED, False):
        return

    @functools.wraps(write)
    def redacting_write(buf: str, path: Any, *args: Any, **kwargs: Any) -> Any:
        return write(redact_notebook_text(buf), path, *args, **kwargs)

    setattr(redacting_write, _WRAPPED, True)
    io.write = redacting_write


def installed(io: Any = None) -> bool:
    """True when ``io`` (papermill's ``papermill_io`` by default) redacts what it writes."""
    io = _papermill_io() if io is None else io
    return bool(getattr(io.write, _WRAPPED, False))


class NotALocation:
    """The handler papermill registers for ``SCHEME``: the entry point exists to load this module."""

    def _refuse(self, path: Any) -> NoReturn:
        raise ValueError(
            f"{path}: {SCHEME} is not a location (ledgerlens registers it so that papermill redacts "
            "every notebook it writes)"
        )

    def read(self, path: str) -> str:
        self._refuse(path)

    def write(self, buf: str, path: str) -> None:
        self._refuse(path)

    def listdir(self, path: str) -> list[str]:
        self._refuse(path)

    def pretty_path(self, path: str) -> str:
        return path


handler = NotALocation()
"""The object of the ``papermill.io`` entry point (defined before ``install`` imports papermill: when
this module is imported first, papermill's import loads the entry point from the half-imported module)."""

install()
