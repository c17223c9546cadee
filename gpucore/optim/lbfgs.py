"""L-BFGS (torch.optim.LBFGS): a limited-memory quasi-Newton method driven by a closure, with an
optional strong-Wolfe line search.

The method (Nocedal & Wright, *Numerical Optimization*, 2nd ed.): the inverse Hessian is
approximated from the last ``history_size`` pairs (s, y) = (step taken, change of gradient), and
the search direction ``d = -H g`` comes from the two-loop recursion (Algorithm 7.4) scaled by
``H_diag = s.y / y.y`` (7.20). Without a line search the step is ``lr`` (the first, at most
``lr / |g|_1``); with ``line_search_fn="strong_wolfe"`` the step length satisfies the strong Wolfe
conditions (Algorithms 3.5 and 3.6, cubic interpolation between bracket ends). Decisions,
stopping tests and constants follow PyTorch's implementation, so the iterates agree with it.

All parameters are treated as one flat vector: the gradients are concatenated, the direction and
the history are flat tensors on the device and in the dtype of the parameters; the scalars (step
length, curvatures, losses) are Python floats.
"""

from __future__ import annotations

import math

from ..autograd.grad_mode import enable_grad, no_grad
from ..creation import zeros
from ..ops.joining import cat
from ..tensor import Tensor
from ._options import check_options
from .optimizer import Optimizer, _place_like


class LBFGS(Optimizer):
    """L-BFGS, as ``torch.optim.LBFGS``. ``step(closure)`` runs up to ``max_iter`` iterations
    (at most ``max_eval`` closure calls), stopping early when the largest gradient entry is at
    most ``tolerance_grad``, or the step or the change of loss is below ``tolerance_change``.
    The closure clears the gradients, computes the loss, calls ``backward()`` and returns it;
    ``step`` returns the loss of its first call.

    One parameter group only (PyTorch's restriction). State, kept under the first parameter as in
    PyTorch: ``func_evals``, ``n_iter``, the last direction ``d`` and step ``t``, the history
    ``old_dirs`` (y), ``old_stps`` (s) and ``ro`` (1 / y.s), ``H_diag``, ``prev_flat_grad``,
    ``prev_loss`` and the recursion's ``al``. It is kept across calls, so each ``step`` continues
    the same quasi-Newton approximation.
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ):
        check_options({"lr": lr})
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(
            lr=lr,
            max_iter=max_iter,
            max_eval=max_eval,
            tolerance_grad=tolerance_grad,
            tolerance_change=tolerance_change,
            history_size=history_size,
            line_search_fn=line_search_fn,
        )
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ----------------------------------------------------------------------------- flat views
    def _flat_grad(self) -> Tensor:
        """Every parameter's gradient, flattened and concatenated (zeros where there is none)."""
        views = []
        for p in self._params:
            if p.grad is None:
                z = zeros(p.numel(), dtype=p.dtype)
                views.append(z if p._dev is None else z.to(p.device))
            else:
                views.append(p.grad.detach().reshape(-1))
        return cat(views, 0)

    def _add_to_params(self, step: float, direction: Tensor) -> None:
        """params += step * direction (the flat direction cut into each parameter's shape)."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset : offset + n].view_as(p), alpha=step)
            offset += n

    def _evaluate_at(self, closure, x0: list, t: float, d: Tensor) -> tuple[float, Tensor]:
        """Loss and flat gradient at x0 + t * d; the parameters are put back to x0."""
        self._add_to_params(t, d)
        with enable_grad():
            loss = float(closure())
        flat = self._flat_grad()
        for p, x in zip(self._params, x0):
            p.copy_(x)
        return loss, flat

    # ----------------------------------------------------------------------------- the step
    def step(self, closure):
        """Minimize for up to ``max_iter`` iterations; returns the closure's first loss."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that re-evaluates the model")
        group = self.param_groups[0]
        with no_grad():
            return self._run(closure, group)

    def _run(self, closure, group: dict):
        lr = float(group["lr"])
        max_iter, max_eval = int(group["max_iter"]), int(group["max_eval"])
        tol_grad, tol_change = float(group["tolerance_grad"]), float(group["tolerance_change"])
        line_search, history_size = group["line_search_fn"], int(group["history_size"])
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        converged = _amax(flat_grad) <= tol_grad
        if converged:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:  # steepest descent, an empty history
                d = flat_grad.neg()
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # keep the pair only where the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                state["al"] = al = [0.0] * len(old_dirs)
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, al, h_diag)

            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(flat_grad.abs().sum().item())) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tol_change:  # not a descent direction
                break

            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = [p.clone() for p in self._params]

                def evaluate(step_len, x0=x0, d=d):
                    return self._evaluate_at(closure, x0, step_len, d)

                loss, flat_grad, t, ls_evals = strong_wolfe(
                    evaluate,
                    t,
                    d,
                    loss,
                    flat_grad,
                    gtd,
                    tolerance_change=tol_change,
                    max_ls=max_eval - evals,
                )
                self._add_to_params(t, d)
                converged = _amax(flat_grad) <= tol_grad
            else:
                self._add_to_params(t, d)
                ls_evals = 0
                if n_iter != max_iter:  # the last iteration's loss is not needed
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._flat_grad()
                    converged = _amax(flat_grad) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if _amax(d) * abs(t) <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=h_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss

    def _load_state_value(self, p: Tensor, name, value, index):
        """LBFGS's state is flat vectors, lists of them and scalars (0-d tensors in PyTorch's
        state dicts, Python floats here), not buffers shaped like the parameter."""
        if isinstance(value, Tensor):
            if value.dim() == 0:
                return value.item()
            return _place_like(value, p)
        if isinstance(value, (list, tuple)):
            return type(value)(self._load_state_value(p, name, v, index) for v in value)
        return value


# ----------------------------------------------------------------------------- the algorithm
def _dot(a: Tensor, b: Tensor) -> float:
    return float((a * b).sum().item())


def _amax(a: Tensor) -> float:
    return float(a.abs().max().item())


def _two_loop(grad: Tensor, ys: list, ss: list, rho: list, al: list, h_diag: float) -> Tensor:
    """d = -H grad by the two-loop recursion over the pairs (s_i, y_i), oldest first; ``al``
    receives the first loop's coefficients."""
    q = grad.neg()
    for i in range(len(ys) - 1, -1, -1):
        al[i] = _dot(ss[i], q) * rho[i]
        q.add_(ys[i], alpha=-al[i])
    r = q.mul_(h_diag)
    for i in range(len(ys)):
        beta = _dot(ys[i], r) * rho[i]
        r.add_(ss[i], alpha=al[i] - beta)
    return r


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to
    ``bounds`` (default: the interval between x1 and x2); the midpoint when the cubic has none
    (Nocedal & Wright, (3.59))."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


def strong_wolfe(
    evaluate,
    t: float,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: float,
    c1: float = 1e-4,
    c2: float = 0.9,
    tolerance_change: float = 1e-9,
    max_ls: int = 25,
) -> tuple[float, Tensor, float, int]:
    """A step length along ``d`` meeting the strong Wolfe conditions, from the point with loss
    ``f``, flat gradient ``g`` and slope ``gtd = g.d``; ``evaluate(t)`` gives (loss, flat
    gradient) at step t. Returns (loss, gradient, t, number of evaluations).

    First a bracketing phase (Nocedal & Wright, Algorithm 3.5) extrapolates by cubic
    interpolation until an interval holding an acceptable step is found; then the zoom phase
    (Algorithm 3.6) shrinks it, keeping trial points at least 10% of the interval from its
    ends. At most ``max_ls`` evaluations in all.
    """
    d_norm = _amax(d)
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = _dot(g_new, d)
    prev = (0.0, f, g, gtd)  # (t, loss, gradient, slope) of the previous trial
    done = False
    tries = 0
    bracket = None
    while tries < max_ls:
        armijo_fails = f_new > f + c1 * t * gtd
        if armijo_fails or (tries > 1 and f_new >= prev[1]):
            bracket = [prev, (t, f_new, g_new, gtd_new)]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = [(t, f_new, g_new, gtd_new)]
            done = True
            break
        if gtd_new >= 0:
            bracket = [prev, (t, f_new, g_new, gtd_new)]
            break
        # extrapolate: the next trial between 1.01 t - 0.01 t_prev and 10 t
        bounds = (t + 0.01 * (t - prev[0]), t * 10)
        t_next = _cubic_min(prev[0], prev[1], prev[3], t, f_new, gtd_new, bounds=bounds)
        prev = (t, f_new, g_new, gtd_new)
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        tries += 1
    if tries == max_ls or bracket is None:
        bracket = [(0.0, f, g, None), (t, f_new, g_new, None)]

    insufficient = False
    low, high = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    while not done and tries < max_ls:
        a, b = bracket[0][0], bracket[1][0]
        if abs(b - a) * d_norm < tolerance_change:
            break
        t = _cubic_min(a, bracket[0][1], bracket[0][3], b, bracket[1][1], bracket[1][3])
        # keep away from the ends: a trial closer than 10% of the interval is moved inward
        top, bottom = max(a, b), min(a, b)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            if insufficient or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = _dot(g_new, d)
        tries += 1
        point = (t, f_new, g_new, gtd_new)
        if f_new > f + c1 * t * gtd or f_new >= bracket[low][1]:
            bracket[high] = point
            low, high = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high][0] - bracket[low][0]) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = point
    t, f_new, g_new, _ = bracket[low]
    return f_new, g_new, t, evals
