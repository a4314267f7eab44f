"""The parts of the build that pyproject.toml cannot declare.

- ``ledgerlens.formats._ledgerwire``: the fast path of the ledger metadata decoder
  (``inventory.rows.LedgerColumns``); the Python decoder handles whatever it declines. pip builds
  it with the system's C compiler (``make setup`` installs gcc from Debian when there is none).
- ``ledgerlens.proto``: the protobuf modules, generated from ``proto/*.proto`` by
  ``proto/generate.py`` (protoc from grpcio-tools, a build requirement) on every build, editable
  installs included; generated code is not kept in git.
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPyWithProto(build_py):
    """``build_py`` that first writes ``lib/ledgerlens/proto`` from ``proto/*.proto``."""

    def run(self) -> None:
        script = HERE / "proto" / "generate.py"
        spec = importlib.util.spec_from_file_location("_ledgerlens_proto_generate", script)
        assert spec is not None and spec.loader is not None
        generate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(generate)
        generate.generate(generate.DEFAULT_OUT)
        super().run()


setup(
    cmdclass={"build_py": BuildPyWithProto},
    ext_modules=[
        Extension(
            "ledgerlens.formats._ledgerwire",
            sources=["lib/ledgerlens/formats/_ledgerwire.c"],
            extra_compile_args=["-O2"],
        )
    ],
)
