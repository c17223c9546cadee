"""finfo/iinfo, result_type/promote_types/can_cast, set_printoptions (Tensor's repr) and the
determinism switch (gpucore/typeinfo.py) against PyTorch; the Tensor attributes of
gpucore/ops/attributes.py."""

import numpy as np
import pytest

import gpucore


def test_finfo_iinfo_as_torch():
    torch = pytest.importorskip("torch")
    for name in ("float16", "bfloat16", "float32", "float64"):
        g, t = gpucore.finfo(getattr(gpucore, name)), torch.finfo(getattr(torch, name))
        for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal"):
            assert getattr(g, attr) == getattr(t, attr), (name, attr)
    assert gpucore.finfo().eps == np.finfo(np.float32).eps
    for name in ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"):
        g, t = gpucore.iinfo(getattr(gpucore, name)), torch.iinfo(getattr(torch, name))
        assert (g.bits, g.max, g.min) == (t.bits, t.max, t.min)
    with pytest.raises(TypeError, match="iinfo"):
        gpucore.iinfo(gpucore.float32)


def test_promotion_helpers_as_torch():
    torch = pytest.importorskip("torch")
    names = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64")
    for a in names:
        for b in names:
            ga, gb, ta, tb = (getattr(m, n) for m in (gpucore, torch) for n in (a, b))
            assert (
                str(gpucore.promote_types(ga, gb)).split(".")[-1]
                == str(torch.promote_types(ta, tb)).split(".")[-1]
            )
            assert gpucore.can_cast(ga, gb) == torch.can_cast(ta, tb), (a, b)
    cases = [
        (np.array([1, 2]), 1.5),
        (np.array([1, 2], np.uint8), 300),
        (np.array([1.0], np.float32), np.array(2.0)),
        (np.array(2), np.array([1.0], np.float32)),
        (np.array([1], np.int32), np.array([2], np.int64)),
    ]
    for a, b in cases:
        g = gpucore.result_type(gpucore.tensor(a), b if np.isscalar(b) else gpucore.tensor(b))
        t = torch.result_type(torch.tensor(a), b if np.isscalar(b) else torch.tensor(b))
        assert str(g).split(".")[-1] == str(t).split(".")[-1], (a, b)


def test_set_printoptions_changes_repr():
    x = gpucore.tensor([1.23456789, 200.5])
    try:
        gpucore.set_printoptions(precision=2)
        assert "1.23" in repr(x) and "1.2346" not in repr(x)
        gpucore.set_printoptions(sci_mode=True)
        assert "e+02" in repr(x)
        gpucore.set_printoptions(threshold=5, edgeitems=2)
        assert "..." in repr(gpucore.arange(10.0))
        gpucore.set_printoptions(linewidth=20, threshold=1000)
        assert max(len(line) for line in repr(gpucore.arange(12.0)).splitlines()) <= 20
        assert gpucore.get_printoptions()["linewidth"] == 20
    finally:
        gpucore.set_printoptions(profile="default")
    assert "1.2346" in repr(x)
    with pytest.raises(ValueError, match="precision"):
        gpucore.set_printoptions(precision=-1)


def test_deterministic_switch():
    assert gpucore.are_deterministic_algorithms_enabled() is False
    try:
        gpucore.use_deterministic_algorithms(True, warn_only=True)
        assert gpucore.are_deterministic_algorithms_enabled() is True
        assert gpucore.is_deterministic_algorithms_warn_only_enabled() is True
    finally:
        gpucore.use_deterministic_algorithms(False)
    assert gpucore.are_deterministic_algorithms_enabled() is False


def test_tensor_attributes_as_torch():
    torch = pytest.importorskip("torch")
    a = np.arange(12.0).reshape(3, 4)
    g, t = gpucore.tensor(a), torch.tensor(a)
    for gv, tv in ((g[1:, 1:], t[1:, 1:]), (g, t), (g[2], t[2])):
        assert gv.storage_offset() == tv.storage_offset()
        assert gv.nbytes == tv.nbytes and gv.itemsize == tv.itemsize
    assert g.get_device() == t.get_device() == -1
    assert g.layout is gpucore.strided and repr(g.layout) == "gpucore.strided"
    np.testing.assert_array_equal(g.H.numpy(), t.H.numpy())
    np.testing.assert_array_equal(g.mH.numpy(), t.mH.numpy())
    assert g[1].data_ptr() - g.data_ptr() == t[1].data_ptr() - t.data_ptr()
    assert g.pin_memory() is g and not g.is_pinned() and g.share_memory_() is g
    assert not g.is_shared()
    assert gpucore.is_floating_point(g) and not gpucore.is_complex(g)
    assert gpucore.is_nonzero(gpucore.tensor([0.5])) is torch.is_nonzero(torch.tensor([0.5]))
    with pytest.raises(ValueError, match="is_nonzero"):
        gpucore.is_nonzero(g)
    g.apply_(lambda v: v * v)
    t.apply_(lambda v: v * v)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
    g.map_(gpucore.tensor(a[0]), lambda v, w: v - w)
    t.map_(torch.tensor(a[0]), lambda v, w: v - w)
    np.testing.assert_array_equal(g.numpy(), t.numpy())
