"""Statically quantized models shared by the C-section tests (tests/runtime/test_c_program.py,
tests/capi/test_qmodel.py), and helpers that read and rewrite a saved file's C program (the
format of gpucore/runtime/c_program.py's docstring)."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np

import gpucore
import gpucore.nn.functional as F
from gpucore import nn
from gpucore.quantization import quantize_static
from gpucore.runtime import c_program


def qmlp():
    """Odd sizes: K not a multiple of 8, N not a multiple of a panel."""
    gpucore.manual_seed(0)
    return nn.Sequential(
        nn.Linear(50, 96), nn.ReLU(), nn.Linear(96, 33), nn.ReLU(), nn.Linear(33, 10)
    )  # fmt: skip


def qcnn():
    """conv + relu + max pool (one padded), twice, then a linear layer."""
    gpucore.manual_seed(1)
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.Flatten(),
        nn.Linear(16 * 3 * 3, 10),
    )


class QRes(nn.Module):
    """A residual sum: the quantized activation is dequantized (dequantize_u8) for a float add
    and a float max pool, then quantized again for the linear layer."""

    def __init__(self):
        super().__init__()
        gpucore.manual_seed(2)
        self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = self.c1(x).relu()
        z = self.c2(y).relu() + y
        return self.fc(F.max_pool2d(z, 2).flatten(1))


# name -> (model factory, input shape, the int8 node kinds its C program must hold)
QMODELS = {
    "qmlp": (qmlp, (7, 50), {"quantize_u8", "qgemm"}),
    "qcnn": (qcnn, (2, 3, 12, 12), {"quantize_u8", "qconv2d", "max_pool2d_u8", "qgemm"}),
    "qres": (QRes, (2, 3, 8, 8), {"quantize_u8", "qconv2d", "dequantize_u8", "qgemm"}),
    # a dynamic batch, calibrated on batches of other sizes: C runs it at the example's size
    "qmlp_dynamic": (qmlp, (7, 50), {"quantize_u8", "qgemm"}),
}


def quantized(name: str, seed: int = 0):
    """(float CompiledModel, its quantize_static'd copy, an input) for QMODELS[name]."""
    make, shape, _ = QMODELS[name]
    rng = np.random.default_rng(seed)
    batches = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
    axes = None
    if name.endswith("_dynamic"):
        axes = {"input": {0: "batch"}}
        batches[1:] = [rng.standard_normal((b, *shape[1:])).astype(np.float32) for b in (3, 9)]
    fm = gpucore.compile(make().eval(), gpucore.tensor(batches[0]), device="cpu", dynamic_axes=axes)
    qm = quantize_static(fm, batches)
    return fm, qm, rng.standard_normal(shape).astype(np.float32)


# --------------------------------------------------------------------------- program words
ARG_WORDS = {c_program.NONE: 1, c_program.INT: 2, c_program.FLOAT: 2, c_program.PACKED: 9}
ARG_WORDS[c_program.QPACKED] = 6


def program_nodes(words) -> list:
    """[(kind name, word index of the node's kind, [(tag, word index of the tag)...])...]: every
    node of the program ``words``, located."""
    kind_names = {v: k for k, v in c_program.KINDS.items()}
    n_consts, n_io, n_nodes = int(words[3]), int(words[4] + words[5]), int(words[6])
    i = 7 + 2 * n_consts
    for _ in range(n_io):
        i += 2 + int(words[i + 1])
    nodes = []
    for _ in range(n_nodes):
        start, kind, nargs = i, int(words[i]), int(words[i + 1])
        i += 2
        args = []
        for _ in range(nargs):
            tag = int(words[i])
            args.append((tag, i))
            i += 5 + 2 * int(words[i + 4]) if tag == c_program.BUF else ARG_WORDS[tag]
        nodes.append((kind_names[kind], start, args))
    assert i == len(words)
    return nodes


def _header(data: bytes) -> tuple[int, dict]:
    n = struct.unpack("<Q", data[:8])[0]
    return n, json.loads(data[8 : 8 + n])


def tensor_bytes(data: bytes, name: str) -> bytes:
    n, head = _header(data)
    b, e = head[name]["data_offsets"]
    return data[8 + n + b : 8 + n + e]


def with_tensor(data: bytes, name: str, new: bytes) -> bytes:
    """The file ``data`` with tensor ``name``'s bytes replaced by ``new`` (same size) and its
    checksum updated: a file whose checksums agree, so only the loader's own checks can refuse
    it."""
    n, head = _header(data)
    b, e = head[name]["data_offsets"]
    assert len(new) == e - b
    old_sum = hashlib.sha256(data[8 + n + b : 8 + n + e]).hexdigest().encode()
    assert data[: 8 + n].count(old_sum) == 1
    new_head = data[: 8 + n].replace(old_sum, hashlib.sha256(new).hexdigest().encode())
    return new_head + data[8 + n : 8 + n + b] + new + data[8 + n + e :]


def program_words(data: bytes) -> np.ndarray:
    return np.frombuffer(tensor_bytes(data, "capi.program"), np.int64).copy()


def with_program(data: bytes, words: np.ndarray) -> bytes:
    return with_tensor(data, "capi.program", words.astype(np.int64).tobytes())
