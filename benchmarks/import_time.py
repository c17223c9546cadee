"""``import gpucore`` in fresh processes, against numpy's and ONNX Runtime's, as a markdown table.

    python benchmarks/import_time.py                    # 15 rounds, this tree
    python benchmarks/import_time.py --rounds 21 --tree /tmp/old-checkout   # and another tree

Each round starts one fresh interpreter per row, the rows in turn (so that the machine's load
falls on all of them alike), and times two things: the import inside the child
(``time.perf_counter`` around the import statement, and its CPU time, ``time.process_time``:
less disturbed by other processes) and the whole process, spawn to exit
(interpreter start and exit included). Medians of the rounds. Byte-compiled imports, as an
installed package has them: the children write their ``.pyc`` files to a temporary
PYTHONPYCACHEPREFIX (filled by one uncounted run each) even where PYTHONDONTWRITEBYTECODE is
set. ``--tree`` adds rows for gpucore imported from another checkout (a baseline), so that a
change is measured side by side in one run. The "modules" column counts the entries that the
import added to ``sys.modules``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_env, also under -m
from bench_env import CpuShare, clean_openblas_env, load_note  # noqa: E402

clean_openblas_env("import_time.py")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import sys, time, json
n0 = len(sys.modules)
t0, c0 = time.perf_counter(), time.process_time()
{stmt}
t1, c1 = time.perf_counter(), time.process_time()
ms, cpu = (t1 - t0) * 1e3, (c1 - c0) * 1e3
print(json.dumps({{"ms": ms, "cpu": cpu, "modules": len(sys.modules) - n0}}))
"""


def _run(stmt: str, env: dict, cwd: str) -> tuple[float, float, float, int]:
    """(import ms inside the child, its CPU ms, process ms spawn to exit, modules added)."""
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(stmt=stmt)], env=env, capture_output=True, text=True,
        cwd=cwd,  # not a checkout: ``-c`` puts the working directory first on sys.path
    )  # fmt: skip
    wall = (time.perf_counter() - t) * 1e3
    if out.returncode != 0:
        raise SystemExit(f"{stmt!r} failed (exit {out.returncode}): {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["ms"], got["cpu"], wall, got["modules"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tree", action="append", default=[],
                    help="another checkout whose gpucore to time too (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base = {k: v for k, v in base.items() if not k.startswith("GPUCORE_")}
    rows: dict[str, tuple[str, str | None]] = {"interpreter (pass)": ("pass", None)}
    rows["numpy"] = ("import numpy", None)
    if importlib.util.find_spec("onnxruntime") is not None:
        rows["onnxruntime"] = ("import onnxruntime", None)
    rows["gpucore (this tree)"] = ("import gpucore", _ROOT)
    rows["gpucore.onnx (this tree)"] = ("import gpucore.onnx", _ROOT)
    for tree in args.tree:
        name = os.path.basename(os.path.normpath(tree))
        rows[f"gpucore ({name})"] = ("import gpucore", os.path.abspath(tree))
        rows[f"gpucore.onnx ({name})"] = ("import gpucore.onnx", os.path.abspath(tree))
    share = CpuShare(children=True)
    res: dict[str, list] = {name: [] for name in rows}
    with tempfile.TemporaryDirectory(prefix="gpucore-import-") as d:
        envs = {}
        for name, (stmt, tree) in rows.items():
            env = dict(base)
            # One pyc prefix per tree: the same module paths differ between trees anyway.
            env["PYTHONPYCACHEPREFIX"] = os.path.join(d, "pyc")
            if tree is not None:
                env["PYTHONPATH"] = os.pathsep.join(p for p in (tree, base.get("PYTHONPATH")) if p)
            envs[name] = env
            _run(stmt, env, d)  # uncounted: byte-compiles, warms the file cache
        for _ in range(args.rounds):
            for name, (stmt, _) in rows.items():
                res[name].append(_run(stmt, envs[name], d))
    print(f"## Fresh-process import times, medians of {args.rounds} rounds (ms)\n")
    print("| import | import ms | import CPU ms | process ms (spawn to exit) | modules added |")
    print("|---|---|---|---|---|")
    for name, runs in res.items():
        ms, cpu, wall, mods = (statistics.median(r[i] for r in runs) for i in range(4))
        print(f"| {name} | {ms:.0f} | {cpu:.0f} | {wall:.0f} | {mods:.0f} |")
    print()
    print(load_note(share.others(), "during the run"))
    print(f"- load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
