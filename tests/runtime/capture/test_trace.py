"""gpucore.runtime.capture.trace: any Module or function into the IR through the op registry."""

import numpy as np
import pytest
from runtime_models import block, eager, mlp, rand, run_graph

import gpucore
from gpucore import nn
from gpucore.runtime.capture.dynamic import capture
from gpucore.runtime.capture.trace import CaptureError, ValuesNeeded, trace


def test_mlp_graph_names_weights_and_inputs():
    m = mlp(8)
    g = trace(m, [gpucore.randn(2, 8)])
    assert g.inputs == ["input"] and g.outputs == ["output"]
    assert [n.op for n in g.order()] == ["linear", "relu", "linear", "relu", "linear"]
    assert {"0.weight", "0.bias", "4.weight"} <= set(g.tensors)
    np.testing.assert_array_equal(g.tensors["0.weight"].data, m[0].weight.detach().numpy())


def test_captured_graph_computes_the_model():
    m = block(16)
    x = rand(2, 5, 16)
    g = trace(m, [gpucore.tensor(x)])
    np.testing.assert_allclose(run_graph(g, [x])[0], eager(m, x), rtol=1e-5, atol=1e-6)


def test_function_inputs_named_after_its_parameters():
    def fn(a, bias):
        return (a * 2 + bias).relu(), a.sum()

    g = trace(fn, [gpucore.randn(3, 4), np.ones(4, np.float32)])
    assert g.inputs == ["a", "bias"] and g.outputs == ["output_0", "output_1"]


def test_inplace_ops_rebind_the_written_tensor():
    m = nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 4))
    x = rand(3, 4)
    g = trace(m, [gpucore.tensor(x)])
    np.testing.assert_allclose(run_graph(g, [x])[0], eager(m, x), rtol=1e-6)

    def fn(a):
        b = a * 1.0
        b += 1
        b.mul_(3)
        return b

    g = trace(fn, [gpucore.tensor(x)])
    np.testing.assert_allclose(run_graph(g, [x])[0], (x + 1) * 3, rtol=1e-6)


def test_a_node_output_returned_twice_gets_a_second_output():
    """A computed tensor returned twice (a dict's two keys, a tuple's two elements): the first
    occurrence takes the output name, the second a clone of it; the compiled model returns
    what the eager one does."""
    gpucore.manual_seed(0)
    lin = nn.Linear(4, 4).eval()
    x = gpucore.randn(2, 4)
    with gpucore.no_grad():
        want = lin(x).numpy()
    cases = [
        (lambda a: (lambda y: {"a": y, "b": y})(lin(a)), lambda r: [r["a"], r["b"]]),
        (lambda a: (lambda y: (y, y))(lin(a)), list),
        (lambda a: (lambda y: (y, [a, y], a))(lin(a)), lambda r: [r[0], r[1][1]]),
    ]
    for fn, leaves in cases:
        cm = gpucore.compile(fn, (x,), device="cpu")
        assert len(set(cm.graph.outputs)) == len(cm.graph.outputs)
        got = leaves(cm(x))
        assert len(got) == 2
        for t in got:
            np.testing.assert_allclose(t.numpy(), want, rtol=1e-6, atol=1e-6)
    r = gpucore.compile(cases[2][0], (x,), device="cpu")(x)
    np.testing.assert_array_equal(r[1][0].numpy(), x.numpy())
    np.testing.assert_array_equal(r[2].numpy(), x.numpy())


def test_output_structure_size_is_bounded():
    """The saved tree's bound (ir/output_tree.py): many empty containers beside one Tensor are
    refused at capture, as the loader refuses them."""
    with pytest.raises(CaptureError, match="more than 4100 tuples"):
        trace(lambda a: (a,) + ((),) * 5000, [gpucore.ones(2)])
    g = trace(lambda a: (a,) + ((),) * 100, [gpucore.ones(2)])
    assert len(g.output_tree["tuple"]) == 101


def test_outputs_that_are_inputs_or_repeated_get_their_own_node():
    g = trace(lambda a: (a, a * 2, a), [gpucore.ones(2)])
    assert g.outputs == ["output_0", "output_1", "output_2"]
    out = run_graph(g, [np.array([1.0, 2.0], np.float32)])
    np.testing.assert_array_equal(out[0], [1, 2])
    np.testing.assert_array_equal(out[2], [1, 2])


def test_nested_outputs_are_flattened_in_order():
    """An LSTM's ``(output, (h_n, c_n))``: three graph outputs, depth first (as
    torch.onnx.export); a nested result holding a non-Tensor is refused."""
    gpucore.manual_seed(0)
    m = nn.LSTM(4, 5)
    x = gpucore.randn(3, 2, 4)
    g = trace(m, [x])
    assert g.outputs == ["output_0", "output_1", "output_2"]
    with gpucore.no_grad():
        out, (h, c) = m(x)
    got = run_graph(g, [x.numpy()])
    for a, b in zip(got, (out, h, c)):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-6, atol=1e-6)
    assert g.output_tree == {"tuple": ["tensor", {"tuple": ["tensor", "tensor"]}]}
    # the error names the bad element's path, not the outermost container
    with pytest.raises(CaptureError, match=r"output\[1\]\[1\] is an int;"):
        trace(lambda a: (a, (a, 3)), [gpucore.ones(2)])


def test_eval_mode_during_capture_and_restored():
    m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    m.train()
    g = trace(m, [gpucore.randn(2, 4)])
    assert m.training and "dropout_mask" not in g.op_counts()


def test_random_ops_are_refused():
    with pytest.raises(CaptureError, match="random"):
        trace(lambda a: a + gpucore.rand(3), [gpucore.ones(3)])


def test_output_tree_of_tuples_lists_and_dicts():
    """Every container is recorded (ir/output_tree.py): a single Tensor, ``((t,),)``, a list, a
    dict with str keys in its order, and empty containers beside Tensors."""
    one = gpucore.ones(2)
    cases = [
        (lambda a: a, "tensor", 1),
        (lambda a: ((a * 2,),), {"tuple": [{"tuple": ["tensor"]}]}, 1),
        (lambda a: [a, a + 1], {"list": ["tensor", "tensor"]}, 2),
        (lambda a: {"z": a, "a": (a + 1, [])},
         {"dict": [["z", "tensor"], ["a", {"tuple": ["tensor", {"list": []}]}]]}, 2),
    ]  # fmt: skip
    for fn, tree, n in cases:
        g = trace(fn, [one])
        assert g.output_tree == tree and len(g.outputs) == n
        assert g.copy().output_tree == tree


def test_bad_model_results_and_inputs():
    """The error names the path of the first unsupported element (not the outermost
    container)."""
    one = gpucore.ones(2)
    bad = [
        (lambda a: (a, {"h": None}), r"output\[1\]\['h'\] is a NoneType;"),
        (lambda a: [a, (a, 2.5)], r"output\[1\]\[1\] is a float;"),
        (lambda a: 3, r"capture: output is an int;"),
        (lambda a: (a, {1: a}), r"output\[1\] is a dict with the key 1;"),
        (lambda a: ((), []), "returned a tuple holding no Tensor"),
    ]
    for fn, match in bad:
        with pytest.raises(CaptureError, match=match):
            trace(fn, [one])
    with pytest.raises(CaptureError, match="example input 0"):
        trace(lambda a: a, [[1.0, 2.0]])


def test_other_threads_are_not_captured():
    import threading

    seen = []

    def other():
        y = gpucore.ones(3) * 2
        y += 1  # an in-place write in another thread: not the model's
        seen.append(y.sum().item())

    def fn(a):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return a + 1

    g = trace(fn, [gpucore.ones(3)])
    assert seen == [9.0] and [n.op for n in g.order()] == ["add"]


def test_setitem_is_captured_and_writes_into_views_are_refused():
    def fn(a):
        b = a * 2
        b[0] = 5.0
        return b

    g = trace(fn, [gpucore.ones(3)])
    np.testing.assert_array_equal(run_graph(g, [np.ones(3, np.float32)])[0], [5, 2, 2])

    def through_view(a):
        b = a * 2
        b[1:].fill_(7.0)  # changes b behind the tracer's back: refused, not mis-captured
        return b

    with pytest.raises(CaptureError, match="view"):
        trace(through_view, [gpucore.ones(3)])


@pytest.mark.parametrize("name", ["NORM", "ACTIVATION", "PAD", "UPSAMPLE", "DISTANCE"])
def test_every_nn_module_captures(name):
    """Every module of the nn table (tests/nn/nn_cases.py) captured and run equals eager."""
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "nn"))
    import nn_cases

    for case in getattr(nn_cases, f"{name}_CASES"):
        m = nn_cases.ours(case, gpucore.float64).eval()  # capture is in eval mode
        ins = [np.asarray(x, np.float64) for x in case.inputs]
        try:
            g = trace(m, [gpucore.tensor(x) for x in ins])
        except CaptureError as e:
            assert "random" in str(e), case
            continue
        got = run_graph(g, ins)
        with gpucore.no_grad():
            want = m(*[gpucore.tensor(x) for x in ins])
        want = want if isinstance(want, tuple) else (want,)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-10, atol=1e-12, err_msg=repr(case))


def test_index_tensors_from_inputs_are_read_as_inputs_or_refused():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = trace(lambda x, i: x.index_select(0, i), [gpucore.tensor(x), np.zeros(2, np.int64)])
    got = run_graph(g, [x, np.array([1, 2])])[0]
    np.testing.assert_array_equal(got, x[[1, 2]])  # the index is an input, not an attribute
    with pytest.raises(CaptureError, match="index tensor computed from the model's inputs"):
        trace(lambda x, i: x[i], [gpucore.tensor(x), np.zeros(2, np.int64)])
    fixed = gpucore.tensor(np.array([3, 0]))
    g = trace(lambda x: x[fixed], [gpucore.tensor(x)])  # a constant key is fine
    np.testing.assert_array_equal(run_graph(g, [x])[0], x[[3, 0]])
    with pytest.raises(CaptureError, match="index tensor computed from the model's inputs"):
        trace(lambda x, i: x[(i * 1).detach()], [gpucore.tensor(x), np.zeros(2, np.int64)])
    w = gpucore.tensor(np.array([0.5, -1.0, 2.0, 0.0], np.float32))
    g = trace(lambda x: x[w.argsort()], [gpucore.tensor(x)])  # a key computed from constants
    np.testing.assert_array_equal(run_graph(g, [x + 1])[0], (x + 1)[[1, 3, 0, 2]])


def test_embedding_lookups_capture_with_the_indices_as_an_input():
    gpucore.manual_seed(0)
    emb = nn.Embedding(10, 4)
    g = trace(emb, [gpucore.tensor(np.array([[1, 2, 3]]))])
    idx = np.array([[9, 0, 4]])
    want = emb.weight.detach().numpy()[idx]
    np.testing.assert_array_equal(run_graph(g, [idx])[0], want)


def test_strict_trace_refuses_host_reads_of_values_computed_from_inputs():
    w = gpucore.randn(3)

    def branch(x):
        return x * 2 if x.sum() > 0 else x - 1  # bool() of a computed value

    def item(x):
        return x * (x.max().item() + 1)

    def size(x):
        return gpucore.nonzero(x > 0)  # a data-dependent size

    def numpy_read(x):
        return x * float((x * 2).numpy().max())

    def weights_only(x):
        return x * float(w.abs().max())  # computed from a constant: stays fixed

    x = gpucore.randn(3)
    for fn in (branch, item, size, numpy_read):
        trace(fn, (x,), bake_values=True)  # jit.trace semantics asked for: values baked in
        with pytest.raises(CaptureError, match="reads the values"):
            trace(fn, (x,), strict=True)
        with pytest.raises(CaptureError, match="reads the values"):
            trace(fn, (x,), strict=True, bake_values=True)
    sources = []
    graph = trace(weights_only, (x,), strict=True, sources=sources)
    assert [v for t, v in sources if t is w] == [w._vbox[0]]  # and the scale, a 0-d constant
    assert len(sources) == sum(graph.is_constant(n) for n in graph.tensors) == 2


def _same_graphs(a, b) -> None:
    assert [(n.op, n.inputs, n.output, n.attrs) for n in a.order()] == [
        (n.op, n.inputs, n.output, n.attrs) for n in b.order()
    ]
    assert a.inputs == b.inputs and a.outputs == b.outputs
    for name, t in a.tensors.items():
        u = b.tensors[name]
        assert (t.shape, t.dtype) == (u.shape, u.dtype), name
        if t.data is not None:
            np.testing.assert_array_equal(t.data, u.data)


def test_shapes_only_trace_runs_no_kernel_of_input_dependent_ops():
    """The same graph as an executing trace, from the ops' infer alone; ops on constants only
    (here a weight scaled inside forward) still run, so their values are right."""
    m = block(16)
    w = gpucore.randn(16)

    def fn(x):
        return m(x) * (w * 2).exp()

    x = rand(2, 5, 16)
    with gpucore.profiler() as p:
        g = trace(fn, [gpucore.tensor(x)], shapes_only=True)
    assert sorted({op for op, _, _ in p.events}) == ["exp", "mul"] and len(p.events) == 2
    _same_graphs(g, trace(fn, [gpucore.tensor(x)]))
    with gpucore.no_grad():
        want = fn(gpucore.tensor(x)).numpy()
    np.testing.assert_allclose(run_graph(g, [x])[0], want, rtol=1e-5, atol=1e-6)


def test_shapes_only_capture_traces_again_when_the_model_reads_values():
    def item(x):
        return x * (x.max().item() + 1)

    def size(x):
        return gpucore.nonzero(x > 0)

    def numpy_read(x):
        return x * float((x * 2).numpy().max())

    x = gpucore.tensor(np.array([1.0, -2.0, 3.0], np.float32))
    for fn in (item, size, numpy_read):
        with pytest.raises(ValuesNeeded):
            trace(fn, (x,), shapes_only=True)
        _same_graphs(
            capture(fn, (x,), shapes_only=True, bake_values=True), trace(fn, (x,), bake_values=True)
        )
        with pytest.raises(CaptureError, match="reads the values"):
            capture(fn, (x,), shapes_only=True)


class _ItemScale(nn.Module):
    """Scales its input by a value read on the host: the read the capture must refuse."""

    def forward(self, x):
        return x * (x.abs().max().item() + 1)


@pytest.mark.parametrize(
    "read",
    [
        lambda t: t.sum().item(),
        lambda t: bool(t.sum() > 0),
        lambda t: float(t.sum()),
        lambda t: int(t.sum()),
        lambda t: [0, 1, 2][t.long().sum().clamp(0, 2)],  # __index__
        lambda t: t.tolist(),
        lambda t: t.numpy(),
        lambda t: np.asarray(t),
        lambda t: t.detach().numpy(),
        lambda t: (t * 2).reshape(-1)[0].item(),
        lambda t: gpucore.nonzero(t > 0),  # a data-dependent size
    ],
)
def test_host_reads_of_input_dependent_values_raise_at_capture(read):
    """Without bake_values, a read of a traced value raises CaptureError where it happens (the
    graph would otherwise answer every input with the example's value), naming the tensor's
    shape and what to do."""

    def fn(x):
        read(x)
        return x + 1

    with pytest.raises(CaptureError, match=r"reads the values of .*shape \(.*bake_values=True"):
        trace(fn, [gpucore.randn(3)])


def test_the_refusal_names_the_module_and_line_and_survives_a_caught_error():
    with pytest.raises(
        CaptureError, match=r"test_trace\.py:\d+ in forward\(\) \(module .*_ItemScale"
    ):
        trace(_ItemScale(), [gpucore.randn(2, 3)])
    with pytest.raises(CaptureError, match=r"reads the values"):
        gpucore.compile(_ItemScale(), (gpucore.randn(2, 3),), device="cpu")

    def swallowed(x):
        try:
            s = x.sum().item()
        except Exception:  # noqa: BLE001 - the model hides the error: the trace still refuses
            s = 0.0
        return x * s

    with pytest.raises(CaptureError, match=r"caught the error"):
        trace(swallowed, [gpucore.randn(3)])


def test_reads_of_constants_fold_and_bake_values_keeps_jit_trace_semantics():
    w = gpucore.tensor(np.array([1.0, -4.0, 2.0], np.float32))

    def fn(x):
        print(x)  # a repr while tracing is shown, not baked into the graph
        k = float(w.abs().max()) + (w * 2).sum().item()  # weights' values: constants, folded
        return x.detach() * k  # detach() of an input is the input, not a constant

    x = rand(3)
    g = trace(fn, [gpucore.tensor(x)])
    other = rand(3) + 1
    np.testing.assert_allclose(run_graph(g, [other])[0], other * np.float32(2.0), rtol=1e-6)
    baked = trace(_ItemScale(), [gpucore.tensor(x)], bake_values=True)
    want = x * (np.abs(x).max() + 1)
    np.testing.assert_allclose(run_graph(baked, [other])[0], other * want[0] / x[0], rtol=1e-5)


@pytest.mark.parametrize("shape", [(3, 3), (2, 3)])
@pytest.mark.parametrize(
    "step",
    [
        lambda y: y.transpose_(0, 1),
        lambda y: y.t_(),
        lambda y: y.swapaxes_(0, 1),
        lambda y: y.unsqueeze_(0).squeeze_(0).t_(),
    ],
)
def test_inplace_view_ops_rebind_self_to_the_view(shape, step):
    """y.transpose_() makes y the transpose: later ops must read the view's node, not y's old
    value (on a square shape the stale value has the right shape and gives a wrong answer)."""

    def fn(a):
        y = a * 1
        step(y)
        return y.sum(0) * gpucore.arange(1.0, y.shape[1] + 1)

    g = trace(fn, [gpucore.tensor(rand(*shape))])
    other = rand(*shape, seed=5)
    want = other.T.sum(0) * np.arange(1, shape[0] + 1)
    np.testing.assert_allclose(run_graph(g, [other])[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(eager(fn, other), want, rtol=1e-5, atol=1e-6)


def test_set_rebinds_and_resize_of_a_traced_tensor_is_refused():
    def shared(a):
        y = gpucore.zeros(3, 3)
        y.set_(a * 2)
        return y + 1

    other = rand(3, 3, seed=2)
    g = trace(shared, [gpucore.tensor(rand(3, 3))])
    np.testing.assert_allclose(run_graph(g, [other])[0], other * 2 + 1, rtol=1e-6)
    for op in (lambda y: y.resize_(9), lambda y: y.resize_as_(gpucore.ones(9)), lambda y: y.set_()):
        with pytest.raises(CaptureError, match=r"resize_\(\)|resize_as_\(\)|set_\(\)"):
            trace(lambda a, op=op: op(a * 1) + 1, [gpucore.randn(3, 3)])


def test_a_bit_cast_view_of_an_input_is_refused_and_of_a_constant_folds():
    with pytest.raises(CaptureError, match=r"view\(gpucore.int32\).*computed from its inputs"):
        trace(lambda a: (a * 2).view(gpucore.int32) + 1, [gpucore.randn(3)])
    w = gpucore.tensor(np.array([1.0, -2.0, 0.5], np.float32))
    g = trace(lambda a: a + w.view(gpucore.int32).float(), [gpucore.randn(3)])
    other = rand(3, seed=3)
    bits = np.array([1.0, -2.0, 0.5], np.float32).view(np.int32).astype(np.float32)
    np.testing.assert_allclose(run_graph(g, [other])[0], other + bits, rtol=1e-6)


_F = nn.functional


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: _F.max_unpool2d(*_F.max_pool2d(x, 2, return_indices=True), 2),
        lambda x: _F.binary_cross_entropy(x[0].sigmoid(), x[1].sigmoid()),
        lambda x: _F.gaussian_nll_loss(x[0, 0], x[0, 1], x[1, 0].abs() + 0.1),
        lambda x: gpucore.take(x, x.reshape(-1, 4).argmax(1) * 3),
    ],
    ids=["max_unpool2d", "binary_cross_entropy", "gaussian_nll_loss", "take"],
)
def test_value_checks_of_input_dependent_tensors_do_not_refuse_a_capture(fn):
    """gpucore's own bounds / range checks read values only to raise (host_quiet): a model
    using these ops compiles, and the compiled graph answers a second input as eager does."""
    example, other = rand(2, 2, 4, 4), rand(2, 2, 4, 4, seed=7)
    compiled = gpucore.compile(fn, (gpucore.tensor(example),), device="cpu")
    want = fn(gpucore.tensor(other)).numpy()
    np.testing.assert_allclose(compiled(gpucore.tensor(other)).numpy(), want, rtol=1e-5, atol=1e-6)
