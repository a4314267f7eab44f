"""The one compiled part of ledgerlens (everything else is declared in pyproject.toml).

``ledgerlens.formats._ledgerwire``: the fast path of the ledger metadata decoder
(``inventory.rows.LedgerColumns``); the Python decoder handles whatever it declines. pip builds
it with the system's C compiler (``make setup`` installs gcc from Debian when there is none).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledgerlens.formats._ledgerwire",
            sources=["lib/ledgerlens/formats/_ledgerwire.c"],
            extra_compile_args=["-O2"],
        )
    ]
)
