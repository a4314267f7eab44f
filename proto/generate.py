"""Generate the Python protobuf modules in lib/ledgerlens/proto from the .proto files here.

Every build runs it (``setup.py``: ``make setup``, ``pip install``), so git keeps no generated code;
``python proto/generate.py`` (``make proto``) runs it by hand. ``--out DIR`` writes elsewhere; the
tests use it to prove the installed modules are current.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE.parent / "lib" / "ledgerlens" / "proto"


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc

    out.mkdir(parents=True, exist_ok=True)
    protos = sorted(str(p.name) for p in HERE.glob("*.proto"))
    rc = protoc.main(["protoc", f"-I{HERE}", f"--python_out={out}", f"--pyi_out={out}", *protos])
    if rc != 0:
        raise SystemExit(f"protoc failed with exit status {rc}")
    written = []
    for path in sorted(out.glob("*_pb2.py*")):
        text = path.read_text()
        # protoc writes top-level imports between generated modules; make them package-relative.
        text = re.sub(r"^import (\w+_pb2) as (\w+)$", r"from . import \1 as \2", text, flags=re.M)
        path.write_text(text)
        written.append(path)
    init = out / "__init__.py"
    init.write_text('"""Generated protobuf modules (see proto/generate.py). Do not edit."""\n')
    written.append(init)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    for p in generate(args.out):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
