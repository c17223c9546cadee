"""One formatter and one linter for the whole tree: ``ruff format`` and ``ruff check`` (config in
pyproject.toml; ruff is pinned in the test extra). Run ``ruff format .`` to fix the first."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff() -> list:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: it is part of the test extra (pip install -e .[test])")
    return [exe]


@pytest.mark.parametrize(
    "args", [["format", "--check", "."], ["check", "."]], ids=["format", "lint"]
)
def test_the_tree_is_clean_under_ruff(args):
    res = subprocess.run(_ruff() + args, cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, f"ruff {' '.join(args)}:\n{res.stdout}{res.stderr}"
