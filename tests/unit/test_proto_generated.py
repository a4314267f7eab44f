"""The protobuf modules the build generated (setup.py) are exactly what proto/generate.py produces from
proto/*.proto now: a .proto changed since ``make setup`` ran is caught here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
INSTALLED = ROOT / "lib" / "ledgerlens" / "proto"


def _generated_files(directory: Path) -> dict[str, str]:
    files = sorted(directory.glob("*_pb2.py")) + sorted(directory.glob("*_pb2.pyi"))
    files.append(directory / "__init__.py")
    return {p.name: p.read_text() for p in files if p.exists()}


def test_generated_modules_are_current(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "proto" / "generate.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    fresh = _generated_files(tmp_path)
    installed = _generated_files(INSTALLED)
    protos = sorted(p.stem for p in (ROOT / "proto").glob("*.proto"))
    assert sorted(n.removesuffix("_pb2.py") for n in fresh if n.endswith("_pb2.py")) == protos
    assert sorted(fresh) == sorted(installed)
    stale = [name for name in fresh if fresh[name] != installed[name]]
    assert not stale, f"regenerate with `make setup` (or `python proto/generate.py`): {stale} differ"


def test_generated_modules_import():
    from ledgerlens.proto import (  # noqa: F401
        bookkeeper_pb2,
        delayed_index_bucket_pb2,
        managed_ledger_pb2,
        pending_delete_pb2,
        schema_storage_pb2,
    )

    assert managed_ledger_pb2.ManagedLedgerInfo.DESCRIPTOR.full_name == "ledgerlens.ml.ManagedLedgerInfo"
    assert bookkeeper_pb2.LedgerMetadataFormat.DESCRIPTOR.fields_by_name["cToken"].number == 12
