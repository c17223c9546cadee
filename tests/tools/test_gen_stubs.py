"""The generated stubs (gpucore/__init__.pyi, gpucore/tensor.pyi) match the live API, so IDEs
and type checkers see every op's function and Tensor method."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("gen_stubs", ROOT / "tools" / "gen_stubs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_shipped_stubs_are_current():
    # a fresh interpreter: what this test session imported must not show in the stubs
    res = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, f"{res.stdout}{res.stderr}: run python tools/gen_stubs.py"


def test_the_stubs_parse_and_list_the_ops():
    gen = _load()
    tensor_names = {
        n.name for n in ast.walk(ast.parse(gen.tensor_stub())) if isinstance(n, ast.FunctionDef)
    }
    assert {"exp", "exp_", "__add__", "matmul", "sum", "T"} <= tensor_names
    init = ast.parse(gen.init_stub())
    exported = {
        a.asname or a.name for n in ast.walk(init) if isinstance(n, ast.ImportFrom) for a in n.names
    } | {n.name for n in ast.walk(init) if isinstance(n, ast.FunctionDef)}
    assert {"exp", "matmul", "tensor", "float32", "nn", "Tensor", "no_grad"} <= exported
