"""The Tensor API: metadata, numpy interop, Python conversions, repr, storage alignment and
PyTorch's API conventions (varargs shapes, dim/keepdim, (values, indices) named tuples, methods)."""

import copy
import inspect

import numpy as np
import pytest

import gpucore
from gpucore import Size, Tensor

DTYPES = [
    gpucore.float32,
    gpucore.float64,
    gpucore.float16,
    gpucore.bfloat16,
    gpucore.int8,
    gpucore.uint8,
    gpucore.int32,
    gpucore.int64,
    gpucore.bool,
]


# ----------------------------------------------------------------------------- metadata
def test_shape_varargs_equals_tuple():
    for make in (gpucore.zeros, gpucore.ones, gpucore.empty, gpucore.rand, gpucore.randn):
        assert make(2, 3).shape == make((2, 3)).shape == make([2, 3]).shape == (2, 3)
        assert make(size=(4, 1)).shape == (4, 1)
    assert gpucore.ones(2, 3).tolist() == gpucore.ones((2, 3)).tolist() == [[1.0] * 3] * 2
    x = gpucore.arange(24)
    assert x.reshape(4, 6).shape == x.reshape((4, 6)).shape == (4, 6)
    assert x.view(2, 3, 4).shape == x.view([2, 3, 4]).shape


def test_size_is_a_tuple():
    s = gpucore.ones(2, 3, 4).shape
    assert isinstance(s, tuple) and isinstance(s, Size)
    assert s == (2, 3, 4) and s != (2, 3) and tuple(s) == (2, 3, 4)
    assert s[0] == 2 and s[-1] == 4 and len(s) == 3
    assert s[1:] == (3, 4) and isinstance(s[1:], Size)
    assert isinstance(s + (5,), Size) and s + (5,) == (2, 3, 4, 5)
    assert s.numel() == 24
    assert repr(s) == "gpucore.Size([2, 3, 4])"
    a, b, c = s
    assert (a, b, c) == (2, 3, 4)
    assert hash(s) == hash((2, 3, 4))
    assert gpucore.tensor(1.0).shape == () and Size([]).numel() == 1


def test_metadata():
    x = gpucore.zeros(2, 3, 4, dtype=gpucore.float64)
    assert x.ndim == 3 and x.dim() == 3
    assert x.dtype is gpucore.float64
    assert x.device == "cpu" and str(x.device) == "cpu" and x.device.type == "cpu"
    assert x.device == gpucore.device("cpu")
    # comparing with any other name is simply False (never an error), as PyTorch
    assert x.device != "cuda" and x.device != "vulkan" and not x.device == "vulkan:x"
    assert x.numel() == 24 and x.nelement() == 24 and gpucore.numel(x) == 24
    assert x.size() == (2, 3, 4) and isinstance(x.size(), Size)
    assert x.size(0) == 2 and x.size(-1) == 4 and x.size(dim=1) == 3
    assert x.stride() == (12, 4, 1) and x.stride(0) == 12 and x.stride(-1) == 1
    assert x.is_contiguous() and x.is_floating_point()
    assert not gpucore.zeros(2, dtype=gpucore.int32).is_floating_point()
    assert x.element_size() == 8
    assert gpucore.is_tensor(x) and not gpucore.is_tensor(np.zeros(2))


def test_strides_of_views_in_elements():
    x = gpucore.zeros(2, 3, 4)
    assert x.permute(2, 0, 1).stride() == (1, 12, 4)
    assert x[:, ::2].stride() == (12, 8, 1)
    assert x[:, 1].stride() == (12, 1)
    assert gpucore.zeros(3, 1).expand(3, 5).stride() == (1, 0)
    assert x.T.stride() == (1, 4, 12)


def test_zero_dim_tensor():
    s = gpucore.tensor(5.0)
    assert s.ndim == 0 and s.shape == () and s.numel() == 1 and s.size() == ()
    assert s.stride() == ()
    for bad in (0, -1):
        with pytest.raises(IndexError, match="0-d"):
            s.size(bad)
        with pytest.raises(IndexError):
            s.stride(bad)


def test_size_dim_out_of_range():
    x = gpucore.ones(2, 3)
    with pytest.raises(IndexError, match=r"\(2, 3\)"):
        x.size(2)
    with pytest.raises(IndexError, match=r"\[-2, 1\]"):
        x.stride(-3)
    with pytest.raises(TypeError):
        x.size(1.0)


@pytest.mark.parametrize("nd", range(0, 9))
def test_up_to_eight_dims(nd):
    shape = tuple([2] * nd)
    x = gpucore.ones(*shape) if nd else gpucore.tensor(1.0)
    assert x.shape == shape
    y = x * 2 + 1
    assert y.sum().item() == 3.0 * 2**nd
    assert x.reshape(-1).shape == (2**nd,)


@pytest.mark.parametrize(
    "make",
    [
        lambda: gpucore.ones(*[1] * 9),
        lambda: gpucore.zeros([1] * 9),
        lambda: gpucore.empty(*[2] * 9),
        lambda: gpucore.rand(*[1] * 9),
        lambda: gpucore.tensor(np.zeros([1] * 9)),
        lambda: gpucore.from_numpy(np.zeros([1] * 9)),
        lambda: gpucore.ones(*[1] * 8).unsqueeze(0),
        lambda: gpucore.ones(*[1] * 8).reshape(*[1] * 9),
        lambda: gpucore.ones(*[1] * 8)[None],
        lambda: gpucore.ones(*[1] * 8).expand(*[1] * 9),
    ],
)
def test_more_than_eight_dims_is_a_shape_error(make):
    with pytest.raises(gpucore.ShapeError, match="at most 8 dims"):
        make()


# ----------------------------------------------------------------------------- numpy interop
def test_from_numpy_zero_copy_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = gpucore.from_numpy(a)
    assert t.dtype is gpucore.float32 and t.shape == (2, 3)
    assert t._data.ctypes.data == a.ctypes.data
    a[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    t[1, 2] = -7.0
    assert a[1, 2] == -7.0
    t.add_(1)
    np.testing.assert_array_equal(a, np.array([[101, 2, 3], [4, 5, -6]], np.float32))


@pytest.mark.parametrize(
    "npd", [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_]
)
def test_from_numpy_each_dtype(npd):
    a = np.array([1, 0, 1], npd)
    t = gpucore.from_numpy(a)
    assert t.dtype.np == np.dtype(npd)
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_strided_array_keeps_strides():
    a = np.arange(12.0).reshape(3, 4)[:, ::2]
    t = gpucore.from_numpy(a)
    assert t.stride() == (4, 2) and not t.is_contiguous()
    assert t.tolist() == a.tolist()
    t[0, 1] = 50.0
    assert a[0, 1] == 50.0


def test_from_numpy_rejects():
    with pytest.raises(TypeError, match="ndarray"):
        gpucore.from_numpy([1, 2])
    with pytest.raises(gpucore.DTypeError, match="complex64"):
        gpucore.from_numpy(np.zeros(2, np.complex64))
    with pytest.raises(gpucore.DTypeError, match="byte order"):
        gpucore.from_numpy(np.zeros(2, ">f4"))


def test_numpy_shares_memory():
    t = gpucore.zeros(3)
    n = t.numpy()
    n[0] = 1.0
    t[1] = 2.0
    assert n.tolist() == [1.0, 2.0, 0.0] and t.tolist() == [1.0, 2.0, 0.0]
    v = t[1:]
    assert np.shares_memory(v.numpy(), n)


def test_numpy_on_requires_grad_raises():
    t = gpucore.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="detach"):
        t.numpy()
    assert t.detach().numpy().tolist() == [1.0, 1.0]
    assert np.shares_memory(t.detach().numpy(), t.numpy(force=True))


def test_array_protocol():
    t = gpucore.arange(4, dtype=gpucore.float32)
    a = np.asarray(t)
    assert a.dtype == np.float32 and np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    c = np.array(t, copy=True)
    assert not np.shares_memory(c, t.numpy()) and c.tolist() == [0, 1, 2, 3]
    assert np.array(t, copy=False).ctypes.data == t._data.ctypes.data
    np.testing.assert_array_equal(np.sqrt(t), np.sqrt(np.arange(4, dtype=np.float32)))
    b = gpucore.tensor([1.5], dtype=gpucore.bfloat16)
    assert np.asarray(b).tolist() == [1.5]
    with pytest.raises(ValueError, match="copy"):
        np.array(b, copy=False)
    with pytest.raises(ValueError, match="copy"):
        np.array(t, dtype=np.float64, copy=False)


def test_tolist():
    assert gpucore.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert gpucore.tensor(3.5).tolist() == 3.5
    assert gpucore.tensor([True, False]).tolist() == [True, False]
    assert gpucore.zeros(2, 0).tolist() == [[], []]
    assert gpucore.tensor([1.5], dtype=gpucore.float16).tolist() == [1.5]
    assert type(gpucore.tensor([1]).tolist()[0]) is int


def test_item():
    assert gpucore.tensor([[2.5]]).item() == 2.5
    assert gpucore.tensor(7).item() == 7 and type(gpucore.tensor(7).item()) is int
    assert type(gpucore.tensor(1.0).item()) is float
    assert gpucore.tensor(True).item() is True
    assert gpucore.tensor([1.00390625], dtype=gpucore.bfloat16).item() == 1.0
    assert gpucore.tensor([3.0], requires_grad=True).item() == 3.0
    with pytest.raises(ValueError, match=r"\(2,\)"):
        gpucore.ones(2).item()
    with pytest.raises(ValueError):
        gpucore.ones(0).item()


def test_format_of_a_0d_tensor_is_its_number():
    loss = gpucore.tensor(1.23456)
    assert f"{loss:.2f}" == "1.23" and f"{gpucore.tensor(7):>3d}" == "  7"
    assert f"{gpucore.tensor([1.5])}" == repr(gpucore.tensor([1.5]))
    with pytest.raises(TypeError):
        f"{gpucore.ones(2):.2f}"


def test_python_scalar_conversions():
    assert float(gpucore.tensor([2.5])) == 2.5
    assert int(gpucore.tensor([[3.7]])) == 3 and int(gpucore.tensor(-3.7)) == -3
    assert bool(gpucore.tensor([0])) is False and bool(gpucore.tensor(2.0)) is True
    assert float(gpucore.tensor(4)) == 4.0
    assert float(gpucore.tensor([1.5], requires_grad=True)) == 1.5
    for conv in (float, int, bool):
        with pytest.raises(ValueError):
            conv(gpucore.ones(2))
        with pytest.raises(gpucore.GpucoreError):
            conv(gpucore.ones(1, 3))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(gpucore.ones(0))


def test_len_and_iter():
    x = gpucore.arange(6).reshape(3, 2)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, Tensor) for r in rows)
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3], [4, 5]]
    rows[1][0] = 99  # rows are views
    assert x[1, 0].item() == 99
    assert [v.item() for v in gpucore.tensor([4, 5])] == [4, 5]
    assert len(gpucore.zeros(0, 3)) == 0 and list(gpucore.zeros(0, 3)) == []
    with pytest.raises(TypeError):
        len(gpucore.tensor(1.0))
    with pytest.raises(TypeError):
        iter(gpucore.tensor(1.0))


def test_repr_formats_floats_as_pytorch():
    # whole numbers as "2.", anything else with four fixed decimals
    assert repr(gpucore.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(gpucore.tensor([[1.0, 0.3333333], [0.5, -2.0]])) == (
        "tensor([[ 1.0000,  0.3333],\n        [ 0.5000, -2.0000]])"
    )
    assert repr(gpucore.tensor([float("nan"), 1.0])) == "tensor([nan,  1.])"


def test_repr():
    r = repr(gpucore.tensor([1.0, 2.5]))
    assert r.startswith("tensor(") and "1." in r and "2.5" in r and "dtype" not in r
    y = gpucore.tensor([1.0, 2.0], requires_grad=True) * 3
    r = repr(y)
    assert "3." in r and "6." in r and "grad_fn=<Mul" in r
    assert "requires_grad=True" in repr(gpucore.tensor([1.0], requires_grad=True))
    assert "dtype=gpucore.int32" in repr(gpucore.tensor([7], dtype=gpucore.int32))
    assert "7" in repr(gpucore.tensor([7], dtype=gpucore.int32))
    assert "dtype" not in repr(gpucore.tensor([7]))
    assert "True" in repr(gpucore.tensor([True]))
    assert "1.5" in repr(gpucore.tensor([1.5], dtype=gpucore.bfloat16))


def test_tensor_constructor_is_torchs():
    """gpucore.Tensor(...) as torch.Tensor(...): sizes or data, in the default floating dtype."""
    torch = pytest.importorskip("torch")
    for args in [(), (2, 3), ([1, 2],), ([[1.5, 2]],), (np.array([1, 2]),), (np.arange(3.0),)]:
        ours, theirs = Tensor(*args), torch.Tensor(*args)
        assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype is gpucore.float32
        assert str(theirs.dtype) == "torch.float32"
        if args and not isinstance(args[0], int):
            assert ours.tolist() == theirs.tolist()
    assert Tensor(gpucore.Size([2, 1])).shape == (2, 1) and Tensor(4).shape == (4,)
    assert Tensor([1, 2], dtype=gpucore.int32).dtype is gpucore.int32
    assert Tensor(gpucore.tensor([1, 2])).dtype is gpucore.int64  # a tensor keeps its dtype
    for bad in (("x",), (2, 3.5)):
        with pytest.raises(TypeError):
            torch.Tensor(*bad)
        with pytest.raises(TypeError):
            Tensor(*bad)


def test_tensor_constructor_and_deepcopy():
    t = Tensor([1.0, 2.0], requires_grad=True)
    assert t.dtype is gpucore.float32 and t.requires_grad and t.is_leaf
    t.grad = gpucore.ones(2)
    c = copy.deepcopy(t)
    assert c.requires_grad and c.tolist() == [1.0, 2.0] and c.grad.tolist() == [1.0, 1.0]
    c.detach()[0] = 9.0
    assert t.tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="leaf"):
        copy.deepcopy(t * 2)


def test_grad_assignment():
    x = gpucore.zeros(2, 3, requires_grad=True)
    assert x.grad is None
    x.grad = gpucore.ones(2, 3)
    assert x.grad.tolist() == [[1.0] * 3] * 2
    x.grad = None
    assert x.grad is None
    with pytest.raises(gpucore.ShapeError, match=r"\(3,\)"):
        x.grad = gpucore.ones(3)
    with pytest.raises(TypeError):
        x.grad = np.ones((2, 3))


def test_requires_grad_only_for_floats():
    with pytest.raises(gpucore.DTypeError, match="floating"):
        gpucore.tensor([1, 2], requires_grad=True)
    assert gpucore.tensor([1, 2], dtype=gpucore.float16, requires_grad=True).requires_grad


# ----------------------------------------------------------------------------- alignment
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("n", [0, 1, 3, 17, 64, 1001])
def test_fresh_storage_is_64_byte_aligned(dt, n):
    made = [
        gpucore.empty(n, dtype=dt),
        gpucore.zeros(n, dtype=dt),
        gpucore.ones(n, 2, dtype=dt),
        gpucore.full((n,), 1, dtype=dt),
        gpucore.tensor(np.ones(n), dtype=dt),
        gpucore.tensor(np.ones(n)).to(dt),
    ]
    if dt.is_floating_point:
        made += [
            gpucore.rand(n, dtype=dt),
            gpucore.randn(n, dtype=dt),
            gpucore.linspace(0, 1, n, dtype=dt),
        ]
    if dt is not gpucore.bool:
        made += [gpucore.arange(n, dtype=dt), gpucore.randint(0, 2, (n,), dtype=dt)]
    for t in made:
        assert t._data.ctypes.data % 64 == 0, (t.dtype, t.shape)


def test_op_results_are_64_byte_aligned():
    x = gpucore.rand(5, 7)
    outs = [
        x + 1,
        x * x,
        x.exp(),
        x.sum(0),
        x.T.contiguous(),
        x.clone(),
        x @ x.T,
        x[gpucore.tensor([0, 2])],
        gpucore.eye(3),
        gpucore.zeros_like(x),
        x > 0.5,
    ]
    for t in outs:
        assert t._data.ctypes.data % 64 == 0


# ----------------------------------------------------------------------------- API conventions
def test_max_min_forms():
    x = gpucore.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 7.0]])
    m = x.max()
    assert isinstance(m, Tensor) and m.shape == () and m.item() == 7.0
    assert x.min().shape == () and x.min().item() == 1.0
    r = x.max(1)
    assert isinstance(r, tuple) and r._fields == ("values", "indices")
    assert r.values.tolist() == [5.0, 7.0] and r.indices.tolist() == [1, 0]
    assert r[0].tolist() == [5.0, 7.0] and r.indices.dtype is gpucore.int64
    values, indices = x.min(dim=0, keepdim=True)
    assert values.shape == (1, 3) and values.tolist() == [[1.0, 2.0, 3.0]]
    assert indices.tolist() == [[0, 1, 0]]
    r = gpucore.max(x, -1, True)
    assert r.values.shape == (2, 1) and r.indices.tolist() == [[1], [0]]
    assert x.max(gpucore.full((2, 3), 4.0)).tolist() == [[4.0, 5.0, 4.0], [7.0, 4.0, 7.0]]
    assert x.argmax().item() == 3 and x.argmax(1).tolist() == [1, 0]


def test_dim_int_or_tuple_and_keepdim():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = gpucore.from_numpy(a)
    np.testing.assert_array_equal(x.sum(1).numpy(), a.sum(1))
    np.testing.assert_array_equal(x.sum((0, 2)).numpy(), a.sum((0, 2)))
    np.testing.assert_array_equal(
        x.sum(dim=(0, -1), keepdim=True).numpy(), a.sum((0, 2), keepdims=True)
    )
    np.testing.assert_array_equal(x.mean([1, 2]).numpy(), a.mean((1, 2)))
    np.testing.assert_array_equal(x.amax((0, 1)).numpy(), a.max((0, 1)))
    np.testing.assert_array_equal(x.sum(2, True).numpy(), a.sum(2, keepdims=True))
    assert x.sum().shape == () and x.sum().item() == a.sum()
    with pytest.raises(IndexError, match="dim 3"):
        x.sum(3)


# Op functions that PyTorch also offers as Tensor methods (torch.X and torch.Tensor.X both exist).
TORCH_METHODS = """abs add addmm all amax amin any argmax argmin bmm broadcast_to chunk clamp clip
clone cos div eq exp expand flatten gather ge gt index_select le log log1p log_softmax logical_and
logical_not logical_or logical_xor logsumexp lt masked_fill matmul max maximum mean min minimum mm
movedim mul narrow ne neg norm numel permute pow reciprocal relu reshape rsqrt scatter_add sigmoid
sign sin softmax split sqrt square squeeze std sub sum t tanh transpose unbind unsqueeze var
where tril triu multinomial topk sort argsort msort cumsum cumprod cummax cummin logcumsumexp
scatter scatter_reduce baddbmm addbmm lerp nan_to_num roll flip fliplr flipud rot90
repeat_interleave index_add index_copy index_fill kthvalue median nanmedian diagonal diag outer
ger trace diff take_along_dim nonzero argwhere count_nonzero bincount unique""".split()


@pytest.mark.parametrize("name", TORCH_METHODS)
def test_op_functions_have_tensor_methods(name):
    assert callable(getattr(gpucore, name))
    assert callable(getattr(Tensor, name)), f"Tensor.{name} is missing"


def test_every_op_function_is_a_method_where_torch_has_one():
    # gpucore functions that are not Tensor methods in PyTorch either.
    not_methods = {
        "arange",
        "as_tensor",
        "backend_info",
        "broadcast_tensors",
        "cat",
        "concat",
        "empty",
        "empty_like",
        "eye",
        "from_numpy",
        "full",
        "full_like",
        "get_rng_state",
        "initial_seed",
        "is_grad_enabled",
        "is_tensor",
        "linspace",
        "logspace",
        "manual_seed",
        "ones",
        "ones_like",
        "rand",
        "rand_like",
        "randint",
        "randint_like",
        "randn",
        "randn_like",
        "seed",
        "set_rng_state",
        "stack",
        "tensor",
        "zeros",
        "zeros_like",
        "gelu",
        "get_device_policy",
        "set_device_policy",
        "save",
        "load",
        "profiler",
        "set_num_threads",
        "get_num_threads",
        "empty_cache",
        "compile",
        # PyTorch's module-level switches (gpucore.legacy, gpucore.autograd.grad_mode)
        "get_default_dtype",
        "set_default_dtype",
        "set_default_tensor_type",
        "is_inference_mode_enabled",
        # gpucore.quantization's (torch has no Tensor methods for them either)
        "quantize_per_tensor",
        "quantize_per_channel",
        "fake_quantize_per_tensor_affine",
        "fake_quantize_per_channel_affine",
        # where the C API lives (gpucore.capi), as numpy.get_include
        "get_include",
        "get_library_dir",
        "get_libraries",
        "get_pkg_config_dir",
        # tensor functions torch offers only as functions
        "bucketize",
        "einsum",
        "meshgrid",
        "randperm",
        "searchsorted",
        "tril_indices",
        "triu_indices",
        "atleast_1d",
        "atleast_2d",
        "atleast_3d",
        "block_diag",
        "cartesian_prod",
        "column_stack",
        "dstack",
        "hstack",
        "row_stack",
        "vstack",
        "tensordot",
        "cdist",
        "pdist",
        "normal",
        # the top-level functional forms (torch has no Tensor methods for them either)
        "adaptive_avg_pool1d",
        "avg_pool1d",
        "batch_norm",
        "celu",
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose2d",
        "conv_transpose3d",
        "cosine_similarity",
        "dropout",
        "embedding",
        "group_norm",
        "instance_norm",
        "layer_norm",
        "max_pool2d",
        "max_pool3d",
        "pairwise_distance",
        "pixel_shuffle",
        "rrelu",
        "selu",
        "threshold",
        # dtype helpers and switches (gpucore/typeinfo.py)
        "are_deterministic_algorithms_enabled",
        "is_deterministic_algorithms_warn_only_enabled",
        "use_deterministic_algorithms",
        "can_cast",
        "promote_types",
        "result_type",
        "get_printoptions",
        "set_printoptions",
        # autocast state (gpucore/amp/autocast_mode.py)
        "get_autocast_dtype",
        "is_autocast_enabled",
        # issue 14's additions that torch has only as functions
        "concatenate",
        "cumulative_trapezoid",
        "isin",
        "rsub",
        "trapezoid",
        "trapz",
        "get_float32_matmul_precision",
        "set_float32_matmul_precision",
    }
    # issue 14's remaining torch names (ops/windows.py, counting.py, solvers.py, differences.py,
    # random_counts.py, inplace_forms.py; creation's asarray; the default device; anomaly mode)
    not_methods |= set(
        "asarray bartlett_window blackman_window hamming_window hann_window kaiser_window "
        "binomial poisson chain_matmul gradient histogramdd unravel_index vander "
        "get_default_device set_default_device is_anomaly_check_nan_enabled is_anomaly_enabled "
        "alpha_dropout_ celu_ dropout_ feature_alpha_dropout_ rrelu_ selu_ threshold_ "
        "channel_shuffle".split()
    )
    # the Not-yet names torch has only as functions (nn/functional/toplevel.py, ops/lowrank.py,
    # ops/lobpcg.py, ops/lu.py, creation's frombuffer, typename, the deprecated range)
    not_methods |= set(
        "bilinear conv_tbc convolution embedding_renorm_ feature_dropout feature_dropout_ "
        "frombuffer lobpcg lu_unpack native_channel_shuffle pca_lowrank pixel_unshuffle range "
        "rms_norm svd_lowrank typename".split()
    )
    # torch.<view>_copy are functions only, but narrow_copy is also a Tensor method
    not_methods |= {n for n in dir(gpucore) if n.endswith("_copy") and n != "narrow_copy"}
    fns = [
        n for n in dir(gpucore) if not n.startswith("_") and inspect.isfunction(getattr(gpucore, n))
    ]
    missing = [n for n in fns if n not in not_methods and not hasattr(Tensor, n)]
    assert missing == []


def test_methods_give_function_results():
    a = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
    x = gpucore.from_numpy(a)
    np.testing.assert_allclose(x.exp().numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(gpucore.exp(x).numpy(), np.exp(a), rtol=1e-6)
    np.testing.assert_allclose(
        x.softmax(1).numpy(), np.exp(a) / np.exp(a).sum(1, keepdims=True), rtol=1e-5
    )
    np.testing.assert_array_equal(x.clamp(-0.5, 1.0).numpy(), np.clip(a, -0.5, 1.0))
    np.testing.assert_array_equal(x.abs().numpy(), np.abs(a))
    np.testing.assert_allclose((x @ x.T).numpy(), a @ a.T, rtol=1e-5)
