"""MatMul, Gemm, Einsum: gpucore's matmul / linear, which the runtime turns into ``gemm`` nodes
(transposes, scalars and bias absorbed)."""

from __future__ import annotations

import math

import numpy as np

from ...nn import functional as F
from ...ops.einsum import diagonals
from .common import gc, table

HANDLERS, handles = table()


def _matmul_shape(ctx, a: tuple, b: tuple) -> tuple:
    a1, b1 = len(a) == 1, len(b) == 1
    a = (1,) + a if a1 else a
    b = b + (1,) if b1 else b
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        raise ctx.invalid(f"cannot multiply shapes {a} and {b}")
    out = ctx.broadcast(a[:-2], b[:-2]) + (a[-2], b[-1])
    out = out[:-2] + out[-1:] if a1 else out
    return ctx.check_size(out[:-1] if b1 else out)


@handles("MatMul")
def matmul(ctx, node, ins):
    """MatMul: numpy's matmul (batched, broadcasting, 1-D operands promoted)."""
    a, b = ins
    _matmul_shape(ctx, tuple(int(s) for s in a.shape), tuple(int(s) for s in b.shape))
    if ctx.is_static(a) and ctx.is_static(b):
        return np.matmul(a, b)
    return gc.matmul(ctx.tensor(a), ctx.tensor(b))


@handles("Gemm")
def gemm(ctx, node, ins):
    """Gemm: alpha * op(A) @ op(B) + beta * C, C broadcast to the result."""
    a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    c = ins[2] if len(ins) > 2 else None
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    if a.ndim != 2 or b.ndim != 2:
        raise ctx.invalid(f"A and B must be 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
    m, k = (a.shape[1], a.shape[0]) if trans_a else tuple(a.shape)
    kb, n = (b.shape[1], b.shape[0]) if trans_b else tuple(b.shape)
    if k != kb:
        raise ctx.invalid(f"inner sizes {k} and {kb} differ")
    ctx.check_size((m, n))
    if c is not None and tuple(ctx.broadcast(c.shape, (m, n))) != (m, n):
        raise ctx.invalid(f"C of shape {tuple(c.shape)} does not broadcast to {(m, n)}")
    if trans_b and not trans_a and alpha == 1.0 and beta == 1.0:
        if c is None or tuple(c.shape) == (n,):  # PyTorch's Linear, as exporters write it
            return F.linear(a, b, None if c is None else ctx.tensor(c))
    a = a.transpose(0, 1) if trans_a else a
    b = b.transpose(0, 1) if trans_b else b
    y = a.matmul(b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None and beta != 0.0:
        ct = ctx.tensor(c)
        y = y + (ct * beta if beta != 1.0 else ct)
    return y


def _parse(ctx, equation: str, ranks: list) -> tuple:
    """(input terms, output term) with every '...' spelt out as upper-case letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.invalid(f"equation {equation!r} has {len(terms)} operands, not {len(ranks)}")
    ell = 0
    for t, r in zip(terms, ranks):
        if "..." in t:
            ell = max(ell, r - (len(t) - 3))
    letters = "".join(chr(ord("A") + i) for i in range(ell))
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - (len(t) - 3)
            t = t.replace("...", letters[ell - n :])
        if len(t) != r or (t and not t.isalpha()):
            raise ctx.invalid(f"equation {equation!r} does not fit operands of ranks {ranks}")
        out_terms.append(t)
    if arrow:
        rhs = rhs.replace("...", letters)
    else:  # implicit: the letters seen once, in order, after the ellipsis
        counts = {c: "".join(out_terms).count(c) for c in "".join(out_terms)}
        rhs = letters + "".join(sorted(c for c, n in counts.items() if n == 1 and c.islower()))
    return out_terms, rhs


def _contract(ctx, a, ta: str, b, tb: str, keep: set) -> tuple:
    """a (term ta) times b (term tb), summing the shared letters not in ``keep``."""
    size = {}
    for t, term in ((a, ta), (b, tb)):
        for c, s in zip(term, t.shape):
            s = int(s)
            if size.get(c, 1) not in (1, s) and s != 1:
                raise ctx.invalid(f"letter {c!r} has sizes {size[c]} and {s}")
            size[c] = max(size.get(c, 1), s)
    batch = [c for c in ta if c in tb and c in keep]
    summed = [c for c in ta if c in tb and c not in keep]
    a_only = [c for c in ta if c not in tb]
    b_only = [c for c in tb if c not in ta]

    def arrange(t, term: str, order: list):
        t = t.permute(*[term.index(c) for c in order]) if list(term) != order else t
        shape = [size[c] if c in batch else int(t.shape[i]) for i, c in enumerate(order)]
        return t.expand(*shape) if tuple(shape) != tuple(t.shape) else t

    pa = arrange(a, ta, batch + a_only + summed)
    pb = arrange(b, tb, batch + summed + b_only)
    nb = [size[c] for c in batch]
    na, ns, nbo = (math.prod(size[c] for c in g) for g in (a_only, summed, b_only))
    ctx.check_size(nb + [na, nbo])
    y = pa.reshape(*nb, na, ns).matmul(pb.reshape(*nb, ns, nbo))
    y = y.reshape(*nb, *[size[c] for c in a_only], *[size[c] for c in b_only])
    return y, "".join(batch + a_only + b_only)


@handles("Einsum")
def einsum(ctx, node, ins):
    """Einsum: diagonals (a letter repeated within one operand), transposes, sums and pairwise
    contractions as matmuls (left to right)."""
    ops = [ctx.tensor(v) for v in ins]
    terms, rhs = _parse(ctx, str(ctx.attr("equation")), [t.ndim for t in ops])
    if len(set(rhs)) != len(rhs):
        raise ctx.invalid(f"output letters {rhs!r} repeat a letter")
    for i, term in enumerate(terms):
        if len(set(term)) != len(term):
            terms[i], ops[i] = diagonals(term, ops[i])
    for i, (t, term) in enumerate(zip(ops, terms)):  # sum letters no one else needs
        others = set(rhs).union(*[set(x) for j, x in enumerate(terms) if j != i])
        drop = [k for k, c in enumerate(term) if c not in others]
        if drop:
            ops[i] = t.sum(dim=tuple(drop))
            terms[i] = "".join(c for c in term if c in others)
    y, ty = ops[0], terms[0]
    for i in range(1, len(ops)):
        keep = set(rhs).union(*[set(x) for x in terms[i + 1 :]])
        y, ty = _contract(ctx, y, ty, ops[i], terms[i], keep)
    if set(ty) != set(rhs):
        raise ctx.invalid(f"output letters {rhs!r} are not among the operands' {ty!r}")
    return y.permute(*[ty.index(c) for c in rhs]) if ty != rhs else y
