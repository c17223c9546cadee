"""gpucore.compile(model) without example inputs (gpucore/runtime/lazy.py): torch.compile's form.

The wrapper trains eagerly, runs calls without gradients as a compiled graph per input
signature from the second call on, recompiles when weights change, and falls back to eager
for what a trace cannot capture."""

import copy
import pickle

import numpy as np
import pytest

import gpucore as gc
import gpucore.nn as nn
from gpucore.runtime import CaptureError, CompiledModel
from gpucore.runtime.lazy import CACHE_SIZE, CompiledFunction, OptimizedModule


def mlp(seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.BatchNorm1d(4))


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)


def test_training_through_the_wrapper_is_eager_training():
    ref, model = mlp(), mlp()
    wrapped = gc.compile(model)
    assert isinstance(wrapped, OptimizedModule)
    x, y = gc.randn(6, 8), gc.randn(6, 4)
    opts = [gc.optim.Adam(m.parameters(), lr=0.01) for m in (ref, wrapped)]
    for _ in range(3):
        for m, opt in zip((ref, wrapped), opts):
            loss = (m(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    for a, b in zip(ref.parameters(), model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert wrapped.stats()["compiled"] == 0


def test_inference_compiles_on_the_second_call_and_matches_eager():
    model = mlp()
    wrapped = gc.compile(model).eval()
    x = gc.randn(5, 8)
    with gc.no_grad():
        outs = [wrapped(x) for _ in range(3)]
        expected = model(x)
    for out in outs:
        close(out, expected)
    s = wrapped.stats()
    assert (s["eager"], s["compiled"], s["compiles"]) == (1, 2, 1)


def test_a_module_without_trainable_parameters_compiles_with_grad_enabled():
    model = mlp().eval().requires_grad_(False)
    wrapped = gc.compile(model)
    x = gc.randn(3, 8)
    for _ in range(3):
        close(wrapped(x), model(x))
    assert wrapped.stats()["compiles"] == 1


CHANGES = ["optimizer", "in_place", "load_state_dict", "new_parameter", "data", "buffer"]


@pytest.mark.parametrize("change", CHANGES)
def test_weight_changes_recompile(change):
    model = mlp()
    wrapped = gc.compile(model).eval()
    x = gc.randn(4, 8)
    with gc.no_grad():
        wrapped(x), wrapped(x)
    assert wrapped.stats()["compiles"] == 1
    if change == "optimizer":
        opt = gc.optim.SGD(model.parameters(), lr=0.5)
        model(x).sum().backward()
        opt.step()
    elif change == "in_place":
        with gc.no_grad():
            model[0].bias.add_(1.0)
    elif change == "load_state_dict":
        model.load_state_dict(mlp(seed=1).state_dict())
    elif change == "new_parameter":
        model[2].weight = nn.Parameter(gc.randn(4, 16))
    elif change == "data":
        model[0].weight.data = gc.randn(16, 8)  # a fresh tensor: its version counter is 0 too
    else:
        model[3].running_mean = gc.full((4,), 3.0)
    with gc.no_grad():
        outs = [wrapped(x) for _ in range(2)]
        expected = model(x)
    for out in outs:
        close(out, expected)
    assert wrapped.stats()["compiles"] == 2


def test_value_dependent_control_flow_runs_eagerly_with_the_reason():
    def f(a, b):
        if a.sum() > 0:
            return a * b
        return a - b

    cf = gc.compile(f)
    assert isinstance(cf, CompiledFunction) and cf.__name__ == "f"
    pos, neg = gc.ones(3), -gc.ones(3)
    b = gc.full((3,), 2.0)
    for _ in range(3):
        close(cf(pos, b), pos * b)
        close(cf(neg, b), neg - b)
    s = cf.stats()
    assert s["compiled"] == 0 and "reads the values" in next(iter(s["fallbacks"].values()))
    strict = gc.compile(f, fullgraph=True)
    strict(pos, b)
    with pytest.raises(CaptureError, match="reads the values"):
        strict(pos, b)


def test_reading_weights_on_the_host_is_allowed():
    model = mlp().eval()

    def f(x):
        scale = float(model[0].weight.abs().max())  # a constant: fine to bake in
        return model(x) * scale

    cf = gc.compile(f)
    x = gc.randn(2, 8)
    with gc.no_grad():
        for _ in range(3):
            close(cf(x), f(x))
    assert cf.stats()["compiles"] == 1


def test_training_mode_kwargs_and_grad_inputs_run_eagerly():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    wrapped = gc.compile(model)
    x = gc.randn(2, 4)
    for _ in range(3):
        wrapped(x)  # training mode: dropout draws
    wrapped.eval()
    xg = gc.randn(2, 4, requires_grad=True)
    for _ in range(3):
        out = wrapped(xg)
    out.sum().backward()
    assert xg.grad is not None
    assert wrapped.stats()["compiled"] == 0

    def g(a, *, k=2.0):
        return a * k

    cg = gc.compile(g)
    for _ in range(3):
        close(cg(x, k=3.0), x * 3.0)
    assert cg.stats()["compiled"] == 0


def test_output_containers():
    """Lists, dicts and nested containers run compiled with the eager structure
    (CompiledModel's output tree); a namedtuple (whose class a compiled run does not rebuild)
    and non-Tensor elements run eagerly, the fallback naming the element's path."""
    from collections import namedtuple

    pair = namedtuple("pair", "a b")

    def as_list(a):
        return [a + 1, a * 2]

    def as_dict(a):
        return {"y": a + 1, "z": (a * 3, [a - 1])}

    def as_namedtuple(a):
        return (a, pair(a + 1, a * 2))

    def with_none(a):
        return a + 1, {"h": None}

    cl, cd = gc.compile(as_list), gc.compile(as_dict)
    cn, c0 = gc.compile(as_namedtuple), gc.compile(with_none)
    x = gc.randn(3)
    for _ in range(3):
        out = cl(x)
        assert isinstance(out, list) and len(out) == 2
        close(out[1], x * 2)
        d = cd(x)
        assert list(d) == ["y", "z"] and isinstance(d["z"], tuple)
        assert isinstance(d["z"][1], list) and len(d["z"][1]) == 1
        close(d["z"][1][0], x - 1)
        assert isinstance(cn(x)[1], pair)
        assert c0(x)[1] == {"h": None}
    assert cl.stats()["compiled"] == 2 and cd.stats()["compiled"] == 2
    assert cn.stats()["compiled"] == 0 and c0.stats()["compiled"] == 0
    (why,) = cn.stats()["fallbacks"].values()
    assert "output[1] is a pair (a tuple subclass" in why
    (why,) = c0.stats()["fallbacks"].values()
    assert "output[1]['h'] is a NoneType" in why


def test_each_signature_compiles_once_and_the_cache_is_bounded():
    model = mlp().eval()
    wrapped = gc.compile(model)
    with gc.no_grad():
        for n in (1, 2, 1, 2, 1):
            close(wrapped(gc.ones(n, 8)), model(gc.ones(n, 8)))
        assert wrapped.stats()["compiles"] == 2
        for n in range(3, 3 + 2 * CACHE_SIZE):
            wrapped(gc.ones(n, 8))
    assert len(wrapped._entries) == CACHE_SIZE


def test_state_dict_attributes_copies_and_pickles_like_torch():
    model = mlp()
    model.label = "digits"
    wrapped = gc.compile(model)
    assert list(wrapped.state_dict()) == [f"_orig_mod.{k}" for k in model.state_dict()]
    assert wrapped._orig_mod is model and wrapped.label == "digits"
    x = gc.randn(2, 8)
    for clone in (copy.deepcopy(wrapped), pickle.loads(pickle.dumps(wrapped))):
        clone.eval()
        with gc.no_grad():
            for _ in range(3):
                close(clone(x), model.eval()(x))
        assert clone.stats()["compiles"] == 1


def test_torch_compile_arguments():
    model = mlp()
    assert gc.compile(model, disable=True) is model
    wrapped = gc.compile(model, mode="max-autotune", dynamic=True, backend="inductor")
    assert isinstance(wrapped, OptimizedModule)

    @gc.compile
    def f(a):
        return a.relu()

    @gc.compile(fullgraph=True)
    def g(a):
        return a.relu()

    x = gc.randn(4)
    for _ in range(3):
        close(f(x), x.relu())
        close(g(x), x.relu())
    with pytest.raises(NotImplementedError, match="backend"):
        gc.compile(model, backend=lambda gm, inputs: gm)
    with pytest.raises(TypeError, match="example_inputs"):
        gc.compile(model, device="cpu")
    with pytest.raises(TypeError, match="Module or a function"):
        gc.compile(3)
    assert isinstance(gc.compile(model.eval(), (gc.randn(2, 8),)), CompiledModel)


def test_a_tensor_returned_twice_compiles():
    """The same tensor under two keys: compiled from the second call, equal to eager."""
    gc.manual_seed(0)
    lin = nn.Linear(4, 4).eval()

    def dup(a):
        y = lin(a)
        return {"a": y, "b": y}

    cf, x = gc.compile(dup), gc.randn(2, 4)
    with gc.no_grad():
        want = lin(x)
        for _ in range(3):
            got = cf(x)
            assert list(got) == ["a", "b"]
            close(got["a"], want)
            close(got["b"], want)
    assert cf.stats() == {"eager": 1, "compiled": 2, "compiles": 1, "fallbacks": {}}


def test_an_unexpected_compile_error_falls_back_to_eager(monkeypatch):
    """A bug in the compiler (any exception) makes the signature run eagerly, the reason in
    stats(); fullgraph=True raises it."""
    import gpucore.runtime.model as model_module

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(model_module, "compile_graph", broken)
    cf, x = gc.compile(lambda a: a * 2.0), gc.randn(3)
    for _ in range(3):
        close(cf(x), x * 2.0)
    (why,) = cf.stats()["fallbacks"].values()
    assert "RuntimeError" in why and "boom" in why
    assert cf.stats()["compiles"] == 0 and cf.stats()["eager"] == 3
    strict = gc.compile(lambda a: a * 2.0, fullgraph=True)
    close(strict(x), x * 2.0)  # (the first call runs eagerly: no compile yet)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="boom"):
            strict(x)


def test_fullgraph_raises_for_an_output_structure_it_refuses():
    """A namedtuple result (which a compiled run would not rebuild) raises the capture error
    under fullgraph=True, on every call, as the module docstring says."""
    from collections import namedtuple

    pair = namedtuple("pair", "a b")
    strict = gc.compile(lambda a: pair(a + 1, a * 2), fullgraph=True)
    x = gc.randn(3)
    for _ in range(3):
        with pytest.raises(CaptureError, match="output is a pair"):
            strict(x)
