"""gpucore.runtime.passes.matmul: matmul/linear into gemm, transposes into its flags, scalars
into its alpha."""

from pass_checks import check_same
from runtime_models import rand

import gpucore
from gpucore.runtime.passes.cleanup import eliminate_dead_code
from gpucore.runtime.passes.matmul import (
    absorb_transposes,
    batch_gemm_rows,
    fold_scalars,
    matmul_to_gemm,
)
from gpucore.runtime.passes.views import compose_views


def test_matmul_and_linear_become_gemm():
    w = gpucore.tensor(rand(5, 4))
    g = check_same(
        lambda x, y: (x @ y, gpucore.nn.functional.linear(x, w)),
        [rand(3, 4), rand(4, 2)],
        [matmul_to_gemm],
    )
    gemms = [n for n in g.order() if n.op == "gemm"]
    assert [n.attrs["trans_b"] for n in gemms] == [False, True]


def test_transposed_operands_flip_the_flags():
    def fn(a, b):
        return a.transpose(-2, -1) @ b.transpose(0, 1)

    g = check_same(fn, [rand(4, 3), rand(5, 4)], [compose_views, matmul_to_gemm, absorb_transposes])
    (gemm,) = [n for n in g.order() if n.op == "gemm"]
    assert gemm.inputs == ["a", "b"] and gemm.attrs["trans_a"] and gemm.attrs["trans_b"]


def test_heads_view_reads_rows_in_place():
    def fn(qkv):  # k^T of one head of a fused projection
        k = qkv[:, :, 4:8].view(2, 3, 2, 2).transpose(1, 2)
        return k @ k.transpose(-2, -1)

    g = check_same(fn, [rand(2, 3, 12)], [compose_views, matmul_to_gemm, absorb_transposes])
    (gemm,) = [n for n in g.order() if n.op == "gemm"]
    assert gemm.attrs["trans_b"] and g.producer[gemm.inputs[1]].attrs["strides"][-1] == 1


def test_scalars_fold_into_alpha():
    def fn(a, b):
        return ((a * 0.5) @ (b / 4.0)) * 3.0

    g = check_same(
        fn, [rand(3, 4), rand(4, 2)], [matmul_to_gemm, fold_scalars, eliminate_dead_code]
    )
    assert g.op_counts() == {"gemm": 1}
    (gemm,) = g.order()
    assert gemm.attrs["alpha"] == 0.5 * 0.25 * 3.0 and gemm.output == "output"


def test_broadcasting_scalars_and_shared_operands_stay():
    def fn(a, b):
        s = a * 2.0
        return s @ b, s.sum()  # s is read twice: not folded

    g = check_same(fn, [rand(3, 4), rand(4, 2)], [matmul_to_gemm, fold_scalars])
    assert g.op_counts()["mul"] == 1


BATCHED = [compose_views, matmul_to_gemm, absorb_transposes, batch_gemm_rows]


def _gemm_shapes(g):
    return [g.tensors[n.output].shape for n in g.order() if n.op == "gemm"]


def test_rows_flattened_for_a_weight_are_multiplied_in_the_batched_shape():
    w, wt = gpucore.tensor(rand(16, 24)), gpucore.tensor(rand(12, 24))

    def fn(x):  # [*, K] @ [K, N] is traced as a 2-D gemm between two reshapes; linear too
        return gpucore.nn.functional.linear(x @ w, wt)

    g = check_same(fn, [rand(2, 5, 16)], [*BATCHED, eliminate_dead_code])
    assert g.op_counts() == {"gemm": 2}  # no views left around either product
    assert _gemm_shapes(g) == [(2, 5, 24), (2, 5, 12)]
    assert g.order()[0].inputs[0] == "x" and g.order()[1].attrs["trans_b"]


def test_batched_rows_follow_the_reshape_the_model_wrote():
    w = gpucore.tensor(rand(6, 8))

    def fn(x):  # [4, 3, 6] rows multiplied, then read as [2, 6, 8]
        return (x.reshape(12, 6) @ w).reshape(2, 6, 8) + 1.0

    g = check_same(fn, [rand(4, 3, 6)], [*BATCHED, eliminate_dead_code])
    assert _gemm_shapes(g) == [(2, 6, 8)] and g.op_counts() == {"gemm": 1, "strided": 1, "add": 1}


def test_batched_rows_need_a_sole_reshape_and_contiguous_rows():
    w = gpucore.tensor(rand(4, 3))

    def shared(x):
        y = x.reshape(6, 4) @ w
        return y.reshape(2, 3, 3), y  # the 2-D product is an output too

    def sliced(x):  # the rows of a slice are not a reshape of x
        return (x[:, :4] @ w).reshape(2, 3, 3)

    def regrouped(x):  # the product's last dim does not survive the reshape
        return (x.reshape(6, 4) @ w).reshape(2, 9)

    for fn, x in ((shared, rand(2, 3, 4)), (sliced, rand(6, 8)), (regrouped, rand(6, 4))):
        g = check_same(fn, [x], [*BATCHED, eliminate_dead_code])
        assert not g.changed[-2], fn.__name__
        assert all(len(s) == 2 for s in _gemm_shapes(g)), fn.__name__
