"""isin and integer matmul, gpucore vs PyTorch side by side: ms per call, medians of 9 calls
alternating between the libraries call by call, both on one thread (run with
GPUCORE_NUM_THREADS=1; PyTorch is set to one thread here). The machine is shared: ratios from
one run, not absolute speeds. Run: ``GPUCORE_NUM_THREADS=1 python benchmarks/tensor_functions.py``.
"""

from __future__ import annotations

import numpy as np
from bench_env import ratio_row

import gpucore

try:
    import torch
except ImportError:
    torch = None


def _row(label: str, g, t) -> None:
    print(ratio_row(label, g, t if torch is not None else None, 9))


def main() -> None:
    if torch is not None:
        torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| call | gpucore ms | torch ms | ratio |\n|---|---|---|---|")
    for n, m, dt in ((100_000, 10, np.int64), (100_000, 1000, np.int64), (1_000_000, 10_000,
                     np.float32)):  # fmt: skip
        e = rng.integers(0, 3 * m, n).astype(dt)
        s = rng.integers(0, 3 * m, m).astype(dt)
        ge, gs = gpucore.tensor(e), gpucore.tensor(s)
        te, ts = (torch.from_numpy(e), torch.from_numpy(s)) if torch else (None, None)
        _row(
            f"isin {n:,} x {m:,} {np.dtype(dt).name}",
            lambda ge=ge, gs=gs: gpucore.isin(ge, gs),
            lambda te=te, ts=ts: torch.isin(te, ts),
        )
    for shape, dt in (((256, 256, 256), np.int8), ((256, 256, 256), np.int32),
                      ((512, 512, 512), np.int64), ((64, 128, 32, 64), np.int32)):  # fmt: skip
        if len(shape) == 3:
            a = rng.integers(-100, 100, shape[:2]).astype(dt)
            b = rng.integers(-100, 100, shape[1:]).astype(dt)
        else:
            a = rng.integers(-100, 100, (shape[0], shape[1], shape[2])).astype(dt)
            b = rng.integers(-100, 100, (shape[0], shape[2], shape[3])).astype(dt)
        ga, gb = gpucore.tensor(a), gpucore.tensor(b)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        _row(
            f"matmul {'x'.join(map(str, shape))} {np.dtype(dt).name}",
            lambda ga=ga, gb=gb: ga @ gb,
            lambda ta=ta, tb=tb: ta @ tb,
        )


if __name__ == "__main__":
    main()
