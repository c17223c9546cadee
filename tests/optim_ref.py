"""float64 numpy references for the optimizer tests (tests/optim, the kernel tests).

Each function applies the update rule of PyTorch's documentation (torch.optim, "Algorithm"
boxes) to a parameter for a sequence of gradients and returns the parameter after every step and
the final state. Written plainly, independently of gpucore's kernels.
"""

from __future__ import annotations

import numpy as np


def sgd(
    p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False
):
    p = np.array(p, np.float64)
    buf = None
    out = []
    for g in grads:
        g = np.array(g, np.float64)
        if maximize:
            g = -g
        if weight_decay:
            g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p.copy())
    return out, {"momentum_buffer": buf}


def adam(
    p,
    grads,
    lr,
    betas=(0.9, 0.999),
    eps=1e-8,
    weight_decay=0.0,
    amsgrad=False,
    maximize=False,
    decoupled=False,
):
    b1, b2 = betas
    p = np.array(p, np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    out = []
    for t, g in enumerate(grads, 1):
        g = np.array(g, np.float64)
        if maximize:
            g = -g
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1**t)
        if amsgrad:
            vmax = np.maximum(vmax, v)
            vhat = vmax / (1 - b2**t)
        else:
            vhat = v / (1 - b2**t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
        out.append(p.copy())
    state = {"step": len(grads), "exp_avg": m, "exp_avg_sq": v}
    if amsgrad:
        state["max_exp_avg_sq"] = vmax
    return out, state


def rmsprop(
    p,
    grads,
    lr,
    alpha=0.99,
    eps=1e-8,
    weight_decay=0.0,
    momentum=0.0,
    centered=False,
    maximize=False,
):
    p = np.array(p, np.float64)
    v = np.zeros_like(p)
    gavg = np.zeros_like(p)
    buf = np.zeros_like(p)
    out = []
    for g in grads:
        g = np.array(g, np.float64)
        if maximize:
            g = -g
        if weight_decay:
            g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        vt = v
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            vt = v - gavg * gavg
        if momentum > 0:
            buf = momentum * buf + g / (np.sqrt(vt) + eps)
            p = p - lr * buf
        else:
            p = p - lr * g / (np.sqrt(vt) + eps)
        out.append(p.copy())
    state = {"step": len(grads), "square_avg": v}
    if centered:
        state["grad_avg"] = gavg
    if momentum > 0:
        state["momentum_buffer"] = buf
    return out, state
