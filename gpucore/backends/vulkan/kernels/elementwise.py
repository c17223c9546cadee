"""Elementwise kernels: unary math and activations (+ backward), copies."""

from __future__ import annotations

from . import _accepts_words, _push, contiguous, copy_array, groups_1d, kernel, launch, local_size

# ----------------------------------------------------------------------------- unary
_UNARY_CODES = {
    "neg": 0, "abs": 1, "exp": 2, "log": 3, "sqrt": 4, "relu": 5, "sigmoid": 6, "tanh": 7,
    "gelu": 8, "sign": 10, "sin": 11, "cos": 12, "reciprocal": 13,
}


def _unary(code):
    def run(be, out, x, **attrs):
        c = code
        if attrs.get("approximate") == "tanh":
            c = 9
        x = contiguous(be, x)
        n = out.size
        if n == 0:
            return
        ox, oy = be.operand(x), be.operand(out)
        launch(be, "unary", (c, 0), [(x, False), (x, False), (out, True)],
               _push(n, ox.offset, ox.offset, oy.offset), groups_1d(n, local_size(be)))

    return run


for _name, _code in _UNARY_CODES.items():
    kernel(_name)(_unary(_code))


def _unary_bwd(code):
    def run(be, out, g, saved, **attrs):
        c = 9 if (code == 8 and attrs.get("approximate") == "tanh") else code
        g = contiguous(be, g)
        saved = contiguous(be, saved)
        n = out.size
        if n == 0:
            return
        os_, og, oy = be.operand(saved), be.operand(g), be.operand(out)
        launch(be, "unary", (c, 1), [(saved, False), (g, False), (out, True)],
               _push(n, os_.offset, og.offset, oy.offset), groups_1d(n, local_size(be)))

    return run


kernel("relu_backward")(_unary_bwd(5))
kernel("sigmoid_backward")(_unary_bwd(6))
kernel("tanh_backward")(_unary_bwd(7))
kernel("gelu_backward")(_unary_bwd(8))




@kernel("clone", accepts=_accepts_words)
def _clone(be, out, x):
    copy_array(be, out, x)
