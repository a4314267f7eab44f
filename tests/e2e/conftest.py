"""End-to-end fixtures: one real Pulsar standalone per session, seeded with traffic and planted failures.

The sandbox is started once (``PulsarSandbox.up``), seeded (``seed.seed``), given its failures
(``failures.plant``) and always stopped at the end (``down``), also when a step fails.

``LEDGERLENS_E2E_WORKDIR=DIR`` reuses a sandbox that is already up, seeded and planted in ``DIR``
(``python -m ledgerlens_sandbox.pulsar up|seed|plant --workdir DIR``) and leaves it running: for
iterating on tests without paying the start-up each time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ledgerlens.errors import SandboxError
from ledgerlens_sandbox.pulsar import AWS_DUMMY, PulsarSandbox


@dataclass
class PulsarEnv:
    """A running sandbox: its state, what the seeding made and the planted ground truth."""

    box: PulsarSandbox
    state: dict[str, Any]
    seeded: dict[str, Any]
    truth: dict[str, Any]


@pytest.fixture(scope="session")
def pulsar_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarEnv]:
    """The session's Pulsar sandbox (up, seeded, planted); torn down at the end unless reused."""
    saved = {k: os.environ.get(k) for k in AWS_DUMMY}
    os.environ.update(AWS_DUMMY)  # boto3 in the pipeline takes moto's dummy credentials from here
    reuse = os.environ.get("LEDGERLENS_E2E_WORKDIR")
    box = PulsarSandbox(Path(reuse) if reuse else tmp_path_factory.mktemp("pulsar"))
    try:
        if reuse:
            state = box.state()
            if not box.status().get("running"):
                pytest.fail(f"LEDGERLENS_E2E_WORKDIR={reuse}: no running sandbox there", pytrace=False)
            seeded = json.loads((box.workdir / "seed.json").read_text())
            truth = json.loads((box.workdir / "ground_truth.json").read_text())
        else:
            from ledgerlens_sandbox.failures import plant
            from ledgerlens_sandbox.seed import seed

            try:
                state = box.up(timeout=300)
                seeded = seed(state)
                truth = plant(box.state())
            except SandboxError as e:
                pytest.fail(f"Pulsar sandbox: {e}", pytrace=False)
            state = box.state()
        yield PulsarEnv(box=box, state=state, seeded=seeded, truth=truth)
    finally:
        if not reuse:
            box.down()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
