#!/usr/bin/env python3
"""Checkpoint fuzz campaign: a mutated gpucore checkpoint must load as exactly what was saved,
or raise SerializationError.

Each case takes one of a few gpucore-written checkpoints (every dtype, 0-d, empty and shared
tensors, nested containers, int keys, non-finite floats, a large tensor) and applies one
mutation (MUTATIONS): bit flips anywhere, in the header or in the tensor data; random bytes;
truncation; appended, inserted or deleted bytes; an edited header length; JSON-aware header edits
(dtype, shape, offsets, names, entries, metadata values, reformatting); swapped or reversed tensor
data; a splice from another checkpoint. Every case runs in-process (``gpucore.io.from_bytes``)
under a time limit; every ``--subprocess-every``-th also runs in a child process
(``gpucore.load`` on a file) so that a crash shows. Outcomes:

    identical   loaded, and saves back to the original bytes (same structure, types and values,
                bit for bit)
    rejected    SerializationError
    undetected  loaded something else                                       (a failure)
    error       another exception                                           (a failure)
    hang        ran past the time limit                                     (a failure)
    crash       the child died on the case, or disagreed with the in-process outcome (a failure)

Usage:
    python tools/fuzz_checkpoints.py --cases 200000        # the full campaign and its table
    python tools/fuzz_checkpoints.py --case 1234 --dump case.safetensors   # reproduce one case
tests/io/test_fuzz.py runs a bounded campaign in CI (GPUCORE_FUZZ_CASES, default 3000).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np

import gpucore
from gpucore.errors import SerializationError
from gpucore.io import from_bytes, to_bytes

OUTCOMES = ("identical", "rejected", "undetected", "error", "hang", "crash")
FAILURES = ("undetected", "error", "hang", "crash")
DTYPES = ["F32", "F64", "F16", "BF16", "I8", "U8", "I32", "I64", "BOOL", "U16", "X", ""]


# ------------------------------------------------------------------------------ originals
def _special(npd, bits) -> gpucore.Tensor:
    return gpucore.from_numpy(np.array(bits, dtype=npd))


def originals() -> list[bytes]:
    """The checkpoints mutated: gpucore.save's bytes of a few objects."""
    rng = np.random.default_rng(0)
    f32 = np.array([0, 0x80000000, 0x7F800000, 0x7FC00123, 1, 0x3F800000], np.uint32)
    shared = gpucore.arange(6).float()
    model = OrderedDict(
        [
            ("fc.weight", gpucore.from_numpy(rng.standard_normal((4, 3), dtype=np.float32))),
            ("fc.bias", gpucore.zeros(4)),
            ("steps", gpucore.tensor(7)),
            ("bits", gpucore.from_numpy(f32.view(np.float32))),
            ("dbl", _special(np.float64, [0.0, -0.0, np.inf, np.nan, 1e-310])),
            ("half", gpucore.from_numpy(np.array([0x7E01, 0x0001], np.uint16).view(np.float16))),
            ("bf", gpucore.ones(3, dtype=gpucore.bfloat16)),
            ("mask", _special(np.bool_, [True, False, True])),
            ("q", _special(np.int8, [-128, 127, 0])),
            ("u", _special(np.uint8, [0, 255, 7])),
            ("i", _special(np.int32, [-(2**31), 2**31 - 1])),
            ("empty", gpucore.zeros(0, 3)),
        ]
    )
    objects = [
        {
            "model": model,
            "optimizer": {
                "state": {0: {"step": 3, "exp_avg": gpucore.ones(4, 3)}, 2: {"step": 3}},
                "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 2]}],
            },
            "epoch": 3,
            "best": float("inf"),
            "loss": float("nan"),
            "tags": ("a", "ü", ""),
        },
        {"a": shared, "tied": [shared, (shared, None)], "deep": [[[[{"x": -1.5}]]]], 5: True},
        gpucore.from_numpy(rng.standard_normal(300, dtype=np.float32)),
        {"no tensors": [1, 2.5, "three", None, {"k": (4,)}]},
        {"w": gpucore.from_numpy(rng.integers(0, 2**62, 70_000)), "b": gpucore.zeros(1)},
    ]
    return [to_bytes(o) for o in objects]


@dataclass
class Layout:
    """Where things are in an original: header end, parsed header, tensor byte ranges."""

    data: bytes
    header_end: int
    header: dict | None
    ranges: list  # (name, absolute begin, absolute end), non-empty tensors only

    @classmethod
    def of(cls, data: bytes) -> Layout:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        ranges = [
            (k, 8 + n + v["data_offsets"][0], 8 + n + v["data_offsets"][1])
            for k, v in header.items()
            if k != "__metadata__" and v["data_offsets"][1] > v["data_offsets"][0]
        ]
        return cls(data, 8 + n, header, ranges)

    @classmethod
    def guess(cls, data: bytes) -> Layout:
        """``of`` for any bytes (an already mutated file): a layout with what can be parsed."""
        try:
            return cls.of(data)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
            n = int.from_bytes(data[:8].ljust(8, b"\0"), "little")
            return cls(data, min(8 + n, len(data)), None, [])  # no header to edit


def _join(header: dict | bytes, body: bytes, indent=None) -> bytes:
    hb = header
    if isinstance(header, dict):
        seps = (",", ":") if indent is None else (", ", ": ")
        text = json.dumps(header, ensure_ascii=False, separators=seps, indent=indent)
        hb = text.encode("utf-8", "surrogatepass")
    hb += b" " * (-len(hb) % 8)
    return len(hb).to_bytes(8, "little") + hb + body


# ------------------------------------------------------------------------------ mutations
def _flip(r: random.Random, data: bytes, lo: int, hi: int, bits: int) -> bytes:
    b = bytearray(data)
    if hi <= lo:
        return data
    for _ in range(bits):
        pos = r.randrange(lo, hi)
        b[pos] ^= 1 << r.randrange(8)
    return bytes(b)


def m_bitflip(r, lay, others):
    return _flip(r, lay.data, 0, len(lay.data), r.choice((1, 1, 2, 3, 8)))


def m_bitflip_header(r, lay, others):
    return _flip(r, lay.data, 8, lay.header_end, r.choice((1, 1, 2)))


def m_bitflip_data(r, lay, others):
    return _flip(r, lay.data, lay.header_end, len(lay.data), r.choice((1, 1, 2, 5)))


def m_random_bytes(r, lay, others):
    b = bytearray(lay.data)
    for _ in range(r.randint(1, 8)):
        b[r.randrange(len(b))] = r.randrange(256)
    return bytes(b)


def m_truncate(r, lay, others):
    cut = r.choice((r.randrange(len(lay.data)), r.randrange(lay.header_end + 1)))
    return lay.data[:cut]


def m_append(r, lay, others):
    return lay.data + r.randbytes(r.choice((1, 3, 8, 64)))


def m_insert_delete(r, lay, others):
    pos, k = r.randrange(len(lay.data)), r.randint(1, 8)
    if r.random() < 0.5:
        return lay.data[:pos] + r.randbytes(k) + lay.data[pos:]
    return lay.data[:pos] + lay.data[pos + k :]


def m_length_field(r, lay, others):
    n = lay.header_end - 8
    new = r.choice((n + r.randint(-16, 16), r.randrange(2**64), n ^ (1 << r.randrange(64))))
    return (new % 2**64).to_bytes(8, "little") + lay.data[8:]


def m_header_edit(r, lay, others):
    h = json.loads(json.dumps(lay.header))  # a deep copy
    meta = h.setdefault("__metadata__", {})
    names = [k for k in h if k != "__metadata__"]
    body = lay.data[lay.header_end :]
    what = r.randrange(9) if names else r.choice((5, 6, 7))
    t = h[r.choice(names)] if names else None
    if what == 0:
        t["dtype"] = r.choice(DTYPES)
    elif what == 1:
        shape = t["shape"]
        op = r.randrange(4)
        if op == 0 and shape:
            i = r.randrange(len(shape))
            shape[i] = max(shape[i] + r.choice((-1, 1, 2)), 0)
        elif op == 1:
            shape.append(1)
        elif op == 2 and shape:
            shape.pop()
        else:
            t["shape"] = shape[::-1] if len(set(shape)) > 1 else [0]
    elif what == 2:
        offs = t["data_offsets"]
        offs[r.randrange(2)] += r.choice((-8, -1, 1, 4))
    elif what == 3:
        other = h[r.choice(names)]
        t["data_offsets"], other["data_offsets"] = other["data_offsets"], t["data_offsets"]
    elif what == 4:
        old = r.choice(names)
        h[old + r.choice(("x", ".0", "#1"))] = h.pop(old)
    elif what == 5:
        if names and r.random() < 0.5:
            del h[r.choice(names)]
        else:
            h["extra"] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    elif what == 6 and meta:
        del meta[r.choice(sorted(meta))]
    elif what == 7 and meta:
        k = r.choice(sorted(meta))
        v = meta[k]
        pos = r.randrange(len(v) + 1)
        meta[k] = v[:pos] + r.choice(("0", "1", "a", '"', "]", "", " ")) + v[pos + 1 :]
    else:  # a harmless rewrite: other key order, other whitespace
        items = list(h.items())
        r.shuffle(items)
        return _join(dict(items), body, indent=r.choice((None, 1, 2)))
    return _join(h, body)


def m_pad_header(r, lay, others):
    hb = lay.data[8 : lay.header_end] + b" " * (8 * r.randint(1, 4))
    return _join(hb, lay.data[lay.header_end :])


def m_swap_data(r, lay, others):
    if not lay.ranges:
        return m_random_bytes(r, lay, others)
    b = bytearray(lay.data)
    name, lo, hi = r.choice(lay.ranges)
    if r.random() < 0.5:
        b[lo:hi] = b[lo:hi][::-1]
    else:
        size = r.choice([e - s for _, s, e in lay.ranges])
        _, lo2, hi2 = r.choice([x for x in lay.ranges if x[2] - x[1] == size])
        _, lo1, hi1 = r.choice([x for x in lay.ranges if x[2] - x[1] == size])
        b[lo1:hi1], b[lo2:hi2] = lay.data[lo2:hi2], lay.data[lo1:hi1]
    return bytes(b)


def m_splice(r, lay, others):
    src = r.choice(others)
    k = r.randint(1, 64)
    at, frm = r.randrange(len(lay.data)), r.randrange(max(len(src) - k, 1))
    return lay.data[:at] + src[frm : frm + k] + lay.data[at + k :]


MUTATIONS = {
    f.__name__[2:]: f
    for f in (
        m_bitflip,
        m_bitflip_header,
        m_bitflip_data,
        m_random_bytes,
        m_truncate,
        m_append,
        m_insert_delete,
        m_length_field,
        m_header_edit,
        m_pad_header,
        m_swap_data,
        m_splice,
    )
}


class Fuzzer:
    def __init__(self, seed: int = 0):
        self.seed = seed
        self.originals = originals()
        self.layouts = [Layout.of(d) for d in self.originals]

    def case(self, i: int) -> tuple[str, int, bytes]:
        """Case ``i``: (mutation name, original index, mutated bytes); deterministic."""
        r = random.Random(f"{self.seed}:{i}")
        kind = r.choice(sorted(MUTATIONS))
        k = r.randrange(len(self.originals))
        for _ in range(20):  # a mutation that changed nothing (a flip in no data) draws again
            data = MUTATIONS[kind](r, self.layouts[k], self.originals)
            if data != self.originals[k]:
                break
            k = r.randrange(len(self.originals))
        return kind, k, data


# ------------------------------------------------------------------------------ outcomes
class _Hang(BaseException):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise _Hang in the main thread after ``seconds`` (where setitimer exists)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def fire(*_):
        raise _Hang

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def classify(loaded_or_exc, original: bytes) -> tuple[str, str]:
    """(outcome, detail) of one load: its result or the exception it raised."""
    if isinstance(loaded_or_exc, SerializationError):
        return "rejected", str(loaded_or_exc)[:120]
    if isinstance(loaded_or_exc, BaseException):
        return "error", f"{type(loaded_or_exc).__name__}: {str(loaded_or_exc)[:200]}"
    try:
        same = to_bytes(loaded_or_exc) == original
    except Exception as e:  # noqa: BLE001 - a loaded object that cannot be saved again
        return "undetected", f"loaded an object that cannot be saved: {e!r}"[:200]
    return ("identical", "") if same else ("undetected", "loaded different content")


def run_one(data: bytes, original: bytes, limit: float) -> tuple[str, str]:
    try:
        with time_limit(limit):
            out = from_bytes(data)
    except _Hang:
        return "hang", f"over {limit} s"
    except Exception as e:  # noqa: BLE001 - every other type is a failure to report
        return classify(e, original)
    return classify(out, original)


# ------------------------------------------------------------------------------ subprocess
_CHILD = r"""
import sys
import gpucore
from gpucore.errors import SerializationError
from gpucore.io import to_bytes
folder = sys.argv[1]
originals = {}
for line in sys.stdin:
    idx, k = line.split()
    if k not in originals:
        with open(f"{folder}/orig{k}.bin", "rb") as f:
            originals[k] = f.read()
    print("start", idx, flush=True)
    try:
        out = gpucore.load(f"{folder}/case{idx}.safetensors")
        res = "identical" if to_bytes(out) == originals[k] else "undetected"
    except SerializationError:
        res = "rejected"
    except Exception as e:
        res = "error"
    print("done", idx, res, flush=True)
"""


def run_children(folder: str, cases: list, limit: float, startup: float = 60.0) -> dict:
    """Load each (idx, original index) case file in child processes: idx -> outcome. A child
    that dies (or passes its time limit) marks the case it was on as 'crash' ('hang'); the rest
    go to a fresh child."""
    results: dict = {}
    todo = list(cases)
    while todo:
        stdin = "".join(f"{i} {k}\n" for i, k in todo)
        try:
            p = subprocess.run(
                [sys.executable, "-c", _CHILD, folder],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=startup + limit * len(todo),
            )
            out, died = p.stdout, p.returncode != 0
            why = f"crash (exit status {p.returncode}): {p.stderr[-300:]}"
        except subprocess.TimeoutExpired as e:
            out, died, why = (e.stdout or b"").decode(), True, "hang"
        started = None
        for line in out.splitlines():
            parts = line.split()
            if parts[:1] == ["start"]:
                started = int(parts[1])
            elif parts[:1] == ["done"]:
                results[int(parts[1])] = parts[2]
                started = None
        if not died:
            break
        culprit = started if started is not None else todo[0][0]
        results[culprit] = why
        todo = [(i, k) for i, k in todo if i not in results]
    return results


# ------------------------------------------------------------------------------ campaign
@dataclass
class Report:
    cases: int = 0
    seconds: float = 0.0
    counts: Counter = field(default_factory=Counter)  # (mutation, outcome) -> n
    failures: list = field(default_factory=list)  # (case, mutation, outcome, detail)
    subprocess_cases: int = 0
    slowest: float = 0.0

    def total(self, outcome: str) -> int:
        return sum(n for (_, o), n in self.counts.items() if o == outcome)

    @property
    def ok(self) -> bool:
        return not any(self.total(o) for o in FAILURES)

    def table(self) -> str:
        head = f"{'mutation':16s} {'cases':>8s}" + "".join(f" {o:>10s}" for o in OUTCOMES)
        rows = [head, "-" * len(head)]
        for kind in sorted(MUTATIONS):
            n = sum(self.counts[(kind, o)] for o in OUTCOMES)
            rows.append(
                f"{kind:16s} {n:8d}" + "".join(f" {self.counts[(kind, o)]:10d}" for o in OUTCOMES)
            )
        rows.append("-" * len(head))
        rows.append(
            f"{'total':16s} {self.cases:8d}" + "".join(f" {self.total(o):10d}" for o in OUTCOMES)
        )
        rows.append(
            f"{self.cases} cases in {self.seconds:.1f} s ({self.subprocess_cases} also in a child "
            f"process), slowest case {self.slowest * 1e3:.1f} ms; failures: "
            f"{sum(self.total(o) for o in FAILURES)}"
        )
        rows += [f"  case {c} ({m}): {o}: {d}" for c, m, o, d in self.failures[:20]]
        return "\n".join(rows)


def campaign(
    cases: int, seed: int = 0, subprocess_every: int = 50, limit: float = 10.0, progress=None
) -> Report:
    """Run cases 0..cases-1 of ``seed``: in-process, and every ``subprocess_every``-th (0: none)
    in a child process too."""
    fz, rep = Fuzzer(seed), Report()
    sampled: dict = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpucore-fuzz-") as folder:
        for k, data in enumerate(fz.originals):
            with open(os.path.join(folder, f"orig{k}.bin"), "wb") as f:
                f.write(data)
        for i in range(cases):
            kind, k, data = fz.case(i)
            t = time.perf_counter()
            outcome, detail = run_one(data, fz.originals[k], limit)
            rep.slowest = max(rep.slowest, time.perf_counter() - t)
            rep.counts[(kind, outcome)] += 1
            if outcome in FAILURES:
                rep.failures.append((i, kind, outcome, detail))
            if subprocess_every and i % subprocess_every == 0:
                with open(os.path.join(folder, f"case{i}.safetensors"), "wb") as f:
                    f.write(data)
                sampled[i] = (kind, k, outcome)
            if progress and (i + 1) % 10_000 == 0:
                progress(i + 1, time.perf_counter() - start)
        if sampled:
            child = run_children(folder, [(i, k) for i, (_, k, _) in sampled.items()], limit)
            rep.subprocess_cases = len(sampled)
            for i, (kind, _, outcome) in sampled.items():
                got = child.get(i, "missing")
                if got != outcome and outcome not in FAILURES:
                    rep.counts[(kind, outcome)] -= 1
                    rep.counts[(kind, "crash")] += 1
                    rep.failures.append((i, kind, "crash", f"child: {got}, in-process: {outcome}"))
    rep.cases, rep.seconds = cases, time.perf_counter() - start
    return rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subprocess-every", type=int, default=100, help="0: no child process")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per case")
    ap.add_argument("--case", type=int, help="reproduce one case: print its outcome")
    ap.add_argument("--dump", help="with --case: write the mutated file here")
    args = ap.parse_args(argv)
    if args.case is not None:
        fz = Fuzzer(args.seed)
        kind, k, data = fz.case(args.case)
        if args.dump:
            with open(args.dump, "wb") as f:
                f.write(data)
        print(kind, f"original {k}", *run_one(data, fz.originals[k], args.time_limit))
        return 0

    def progress(n, s):
        print(f"  {n} cases, {s:.0f} s", file=sys.stderr, flush=True)

    rep = campaign(args.cases, args.seed, args.subprocess_every, args.time_limit, progress)
    print(rep.table())
    return 0 if rep.ok else 1


if __name__ == "__main__":
    sys.exit(main())
