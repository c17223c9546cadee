"""Spectral normalization as a forward pre-hook, as torch.nn.utils.spectral_norm (SN-GAN
discriminators): the weight is divided by an estimate of its largest singular value, sigma =
u^T W v, with u and v refined by ``n_power_iterations`` steps of power iteration at every forward
in training mode (kept as the buffers ``<name>_u`` / ``<name>_v``, updated in place); the
parameter becomes ``<name>_orig``. u and v start from gpucore's random stream (so not PyTorch's
values), normalized."""

from __future__ import annotations

from ...autograd.grad_mode import no_grad
from ...errors import ShapeError
from ...tensor import Tensor
from ..functional import normalize
from ..parameter import Parameter

__all__ = ["spectral_norm", "remove_spectral_norm"]

_TRANSPOSED = ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


class SpectralNorm:
    """The forward pre-hook that sets ``module.<name>`` to the normalized weight."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float):
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name, self.n_power_iterations, self.dim, self.eps = name, n_power_iterations, dim, eps

    def reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            order = [self.dim, *[d for d in range(weight.ndim) if d != self.dim]]
            weight = weight.permute(*order)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration: bool) -> Tensor:
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mat.t() @ u, dim=0, eps=self.eps))
                    u.copy_(normalize(mat @ v, dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()  # the buffers change in place at the next forward
        sigma = u.dot(mat @ v)
        return weight / sigma

    def __call__(self, module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(
    module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12, dim=None
):
    """Apply spectral normalization to ``module.<name>`` (see the module docstring); dim: the
    output dim (default 1 for transposed convolutions, else 0). Returns the module."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, SpectralNorm) and hook.name == name:
            raise RuntimeError(
                f"Cannot register two spectral_norm hooks on the same parameter {name}"
            )
    weight = module._parameters.get(name)
    if weight is None:
        raise ShapeError(f"spectral_norm: module has no parameter {name!r}")
    if dim is None:
        dim = 1 if type(module).__name__ in _TRANSPOSED else 0
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    with no_grad():
        mat = fn.reshape_weight_to_matrix(weight)
        h, w = mat.shape
        u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    del module._parameters[name]
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.detach())
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name: str = "weight"):
    """Put the (current) normalized weight back as the parameter ``<name>``."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            with no_grad():
                weight = hook.compute_weight(module, do_power_iteration=False)
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_orig"]
            del module._buffers[name + "_u"]
            del module._buffers[name + "_v"]
            if name in module.__dict__:
                del module.__dict__[name]
            module.register_parameter(name, Parameter(weight.detach()))
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
