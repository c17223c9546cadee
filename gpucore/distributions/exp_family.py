"""ExponentialFamily: densities p(x; t) = h(x) exp(<t, T(x)> - A(t)) (torch's base of the same
name). A family gives its natural parameters t (``_natural_params``) and log-normaliser A
(``_log_normalizer``); the gradient of A (gpucore autograd) gives the expected sufficient
statistics, hence the generic entropy and the KL divergence between two members of one family
as a Bregman divergence of A."""

from __future__ import annotations

import gpucore as gc

from ..autograd.grad_mode import enable_grad
from .distribution import Declared

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Declared):
    """Base of the exponential families; see the module docstring."""

    _mean_carrier_measure = None  # E[log h(x)]; a family that knows it enables entropy()

    def _natural_params(self) -> tuple:
        raise NotImplementedError(f"{type(self).__name__}: natural parameters not declared")

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError(f"{type(self).__name__}: log-normaliser not declared")

    def _normalizer_and_grads(self):
        """A(t) at this distribution's natural parameters and dA/dt (the mean statistics)."""
        with enable_grad():
            t = [p.detach().requires_grad_() for p in self._natural_params()]
            a = self._log_normalizer(*t)
            grads = gc.autograd.grad(a.sum(), t, create_graph=True)
        return t, a, grads

    def entropy(self):
        """-E[log p] = A(t) - <t, dA/dt> - E[log h(x)]."""
        if self._mean_carrier_measure is None:
            raise NotImplementedError(f"{type(self).__name__} does not implement entropy")
        t, a, grads = self._normalizer_and_grads()
        out = a - self._mean_carrier_measure
        for ti, gi in zip(t, grads):
            out = out - (ti * gi).reshape(tuple(self.batch_shape) + (-1,)).sum(-1)
        return out


def bregman_kl(p: ExponentialFamily, q: ExponentialFamily):
    """KL(p || q) of two members of one exponential family:
    A(t_q) - A(t_p) - <t_q - t_p, dA/dt(t_p)>."""
    tp, ap, grads = p._normalizer_and_grads()
    tq = q._natural_params()
    out = q._log_normalizer(*tq) - ap
    for a, b, g in zip(tq, tp, grads):
        out = out - ((a - b) * g).reshape(tuple(p.batch_shape) + (-1,)).sum(-1)
    return out
