"""einsum: Einstein summation as a composition (no kernel, gradients for free).

Each operand first takes its repeated subscripts' diagonals and sums the subscripts no other
operand and not the output names; then operands are contracted left to right, each pair as one
batched matmul (batch subscripts, the pair's contracted subscripts, and each side's own), and
the result is permuted into the output's order. ``...`` broadcasts as in PyTorch (right-aligned).

kernels: none (matmul's and the view ops').
"""

from __future__ import annotations

import math
import string

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tensor import Tensor
from .api import public, type_name
from .elementwise import where
from .linalg import matmul

_LETTERS = string.ascii_letters


def _sublist_equation(args) -> tuple:
    """einsum(op1, [0, 1], op2, [1, 2], [0, 2]) as ('ab,bc->ac', operands)."""
    ops, terms = [], []
    rest = list(args)
    while len(rest) >= 2 and isinstance(rest[0], Tensor):
        ops.append(rest.pop(0))
        terms.append(rest.pop(0))
    out = rest.pop(0) if rest else None

    def term(sub):
        s = ""
        for v in sub:
            if v is Ellipsis:
                s += "..."
            elif isinstance(v, int) and 0 <= v < 52:
                s += _LETTERS[v]
            else:
                raise ValueError(f"einsum(): sublist entries must be ints in [0, 52), got {v!r}")
        return s

    eq = ",".join(term(t) for t in terms)
    if out is not None:
        eq += "->" + term(out)
    return eq, tuple(ops)


def _parse(equation: str, operands: tuple) -> tuple:
    """([term per operand], output term) with ``...`` replaced by letters unused elsewhere."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum(): the equation {equation!r} names {len(terms)} operands but "
            f"{len(operands)} were given"
        )
    free = [c for c in _LETTERS if c not in eq]
    n_ell = 0
    for t, x in zip(terms, operands):
        if "..." in t:
            n_ell = max(n_ell, x.ndim - (len(t) - 3))
    ell = "".join(free[:n_ell])
    out_terms = []
    for i, (t, x) in enumerate(zip(terms, operands)):
        if t.count("...") > 1 or any(c not in _LETTERS for c in t.replace("...", "")):
            raise ValueError(f"einsum(): invalid subscripts {t!r} for operand {i}")
        if "..." in t:
            k = x.ndim - (len(t) - 3)
            if k < 0:
                raise ShapeError(f"einsum(): operand {i} has {x.ndim} dims, too few for {t!r}")
            t = t.replace("...", ell[n_ell - k :])
        if len(t) != x.ndim:
            raise ShapeError(
                f"einsum(): subscripts {terms[i]!r} name {len(t)} dims but operand {i} has "
                f"shape {tuple(x.shape)}"
            )
        out_terms.append(t)
    if arrow:
        if rhs.count("...") > 1:
            raise ValueError(f"einsum(): invalid output subscripts {rhs!r}")
        out = rhs.replace("...", ell)
        for c in out:
            if c not in _LETTERS or out.count(c) > 1 or not any(c in t for t in out_terms):
                raise ValueError(
                    f"einsum(): output subscript {c!r} is repeated, invalid or names no input dim"
                )
    else:
        counts = {}
        for t in out_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return out_terms, out


def diagonals(t: str, x: Tensor) -> tuple:
    """(term, x) with each repeated subscript reduced to its diagonal."""
    while True:
        rep = next((c for c in t if t.count(c) > 1), None)
        if rep is None:
            return t, x
        i = t.index(rep)
        j = t.index(rep, i + 1)
        n = x.shape[i]
        if x.shape[j] != n:
            raise ShapeError(
                f"einsum(): subscript {rep!r} is repeated over dims of sizes {n} and {x.shape[j]}"
            )
        eye = np.eye(n, dtype=bool).reshape([n if d in (i, j) else 1 for d in range(x.ndim)])
        mask = Tensor._wrap(np.ascontiguousarray(eye), D.bool_)
        x = where(mask, x, 0).sum(j)
        t = t[:j] + t[j + 1 :]


def _sum_unused(t: str, x: Tensor, keep: str) -> tuple:
    dims = tuple(i for i, c in enumerate(t) if c not in keep)
    if not dims:
        return t, x
    return "".join(c for c in t if c in keep), x.sum(dims)


def _contract(ta: str, a: Tensor, tb: str, b: Tensor, keep: str) -> tuple:
    """(term, tensor) of a and b contracted over their shared subscripts not in ``keep``."""
    size = {}
    for t, x in ((ta, a), (tb, b)):
        for c, s in zip(t, x.shape):
            old = size.get(c)
            if old is None or old == 1:
                size[c] = s
            elif s not in (1, old):
                raise ShapeError(
                    f"einsum(): subscript {c!r} has sizes {old} and {s}, which do not broadcast"
                )
    batch = [c for c in ta if c in tb and c in keep]
    contr = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]

    def arrange(t, x, order):
        x = x.permute(*[t.index(c) for c in order])
        return x.expand(*[size[c] for c in order])

    a3 = arrange(ta, a, batch + left + contr)
    b3 = arrange(tb, b, batch + contr + right)
    nb = [size[c] for c in batch]
    nl, nc, nr = (math.prod(size[c] for c in g) for g in (left, contr, right))
    prod = matmul(a3.reshape(nb + [nl, nc]), b3.reshape(nb + [nc, nr]))
    term = batch + left + right
    return "".join(term), prod.reshape([size[c] for c in term])


@public("einsum", method=False)
def einsum(equation, *operands) -> Tensor:
    """Einstein summation, as torch.einsum: ``einsum('bij,bjk->bik', a, b)``; repeated
    subscripts take diagonals, subscripts missing from the output are summed, ``...`` broadcasts,
    no ``->`` gives the output PyTorch's implicit order. Operands may also come as one list, or
    in the sublist form ``einsum(a, [0, 1], b, [1, 2], [0, 2])``."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_equation((equation,) + operands)
    elif not isinstance(equation, str):
        raise ArgumentTypeError(
            f"einsum(): argument 'equation' (position 1) must be str, not {type_name(equation)}"
        )
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise ArgumentTypeError(f"einsum(): operand {i} must be a Tensor, not {type_name(x)}")
    if not operands:
        raise ValueError("einsum(): needs at least one operand")
    dt = operands[0].dtype
    if any(x.dtype is not dt for x in operands):
        raise DTypeError(
            "einsum(): operands must have one dtype, got "
            f"{', '.join(str(x.dtype) for x in operands)}"
        )
    terms, out = _parse(equation, operands)
    items = [diagonals(t, x) for t, x in zip(terms, operands)]
    for k in range(len(items)):
        others = out + "".join(t for j, (t, _) in enumerate(items) if j != k)
        items[k] = _sum_unused(*items[k], others)
    t, x = items[0]
    for k in range(1, len(items)):
        keep = out + "".join(tt for tt, _ in items[k + 1 :])
        t, x = _contract(t, x, *items[k], keep)
    t, x = _sum_unused(t, x, out)
    if t != out:
        x = x.permute(*[t.index(c) for c in out])
    return x.clone() if x is operands[0] else x  # a new tensor, as PyTorch
