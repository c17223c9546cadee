"""gpucore.onnx.ops.linalg: MatMul (batched, broadcasting, 1-D), Gemm (alpha, beta, transposes,
C broadcast), Einsum (common forms), at opset 13 and the newest."""

import pytest
from onnx_cases import OPSETS, check_op, rand

MATMUL = [
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),
    ((4,), (4, 3)),
    ((3, 4), (4,)),
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("sa, sb", MATMUL)
def test_matmul(sa, sb, opset):
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    check_op("MatMul", [a, b], opset=opset)
    check_op("MatMul", [a, b], opset=opset, static=(1,))
    check_op("MatMul", [a, b], opset=opset, all_static=True)


GEMM = [
    {},
    {"transB": 1},
    {"transA": 1, "alpha": 0.5},
    {"transA": 1, "transB": 1, "beta": 2.0},
    {"alpha": 2.0, "beta": 0.0},
]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("attrs", GEMM)
@pytest.mark.parametrize("c_shape", [None, (5,), (3, 1), (3, 5), ()])
def test_gemm(attrs, c_shape, opset):
    a = rand(4, 3, seed=1) if attrs.get("transA") else rand(3, 4, seed=1)
    b = rand(5, 4, seed=2) if attrs.get("transB") else rand(4, 5, seed=2)
    args = [a, b] + ([] if c_shape is None else [rand(*c_shape, seed=3)])
    check_op("Gemm", args, attrs, opset=opset, static=(1, 2))
    check_op("Gemm", args, attrs, opset=opset)


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,...jk", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bi,bi->b", [(3, 4), (3, 4)]),
]


@pytest.mark.parametrize("opset", [12, OPSETS[-1]])
@pytest.mark.parametrize("equation, shapes", EINSUM)
def test_einsum(equation, shapes, opset):
    args = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    check_op("Einsum", args, {"equation": equation}, opset=opset)
