"""The README's runbook commands, as a person copies them: every ``papermill`` line writes outside the
clone (the output notebook and ``out_dir``) and passes only parameters the runbook declares."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[tuple[list[str], dict[str, str]]]:
    """(argv, shell variables set in the same block) of each papermill command of the README."""
    text = (ROOT / "README.md").read_text()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        variables = dict(re.findall(r"^(\w+)=(\S+)", joined, re.M))
        for line in joined.splitlines():
            if "papermill notebooks/" in line:
                out.append((shlex.split(line.split("#")[0]), variables))
    return out


def _parameters(notebook: Path) -> set[str]:
    nb = json.loads(notebook.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    return set(re.findall(r"^(\w+)\s*:", "".join(cell["source"]), re.M))


def _outside_clone(path: str, variables: dict[str, str]) -> bool:
    for name, value in variables.items():
        path = path.replace(f"${name}", value.split(" ")[0])
    return path.startswith("/") and not path.startswith(str(ROOT))


def test_papermill_lines_write_outside_the_clone_and_pass_declared_parameters() -> None:
    commands = _commands()
    assert len(commands) >= 3
    for argv, variables in commands:
        notebook, output = argv[1], argv[2]
        assert _outside_clone(output, variables), f"{' '.join(argv)}: writes {output} into the clone"
        params = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-p"}
        declared = _parameters(ROOT / notebook)
        assert set(params) <= declared, f"{notebook}: undeclared parameters {set(params) - declared}"
        if "out_dir" in declared:
            assert "out_dir" in params and _outside_clone(params["out_dir"], variables), " ".join(argv)
