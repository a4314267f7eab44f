"""environment.yml and pyproject.toml must list the same pinned packages."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _pyproject() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return set(meta["dependencies"]) | set(meta["optional-dependencies"]["dev"])


def _environment() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {p for p in pip if not p.startswith("-e")}


def test_same_packages_and_pins() -> None:
    py, env = _pyproject(), _environment()
    assert py - env == set(), "in pyproject.toml but not environment.yml"
    assert env - py == set(), "in environment.yml but not pyproject.toml"


def test_every_dependency_is_pinned() -> None:
    assert all("==" in spec for spec in _pyproject())


def test_design_card_packages_present() -> None:
    names = {spec.split("==")[0].split("[")[0] for spec in _pyproject()}
    for pkg in ("jupyterlab", "ipywidgets", "pyspark", "pulsar-client", "plotly", "papermill", "boto3"):
        assert pkg in names
