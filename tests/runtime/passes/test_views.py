"""gpucore.runtime.passes.views: chains of views compose; elementwise ops sink through
reshapes."""

from pass_checks import check_same
from runtime_models import rand

from gpucore.runtime.passes.views import compose_views, is_contiguous_layout, sink_views


def test_view_chains_become_one_strided_view():
    def fn(x):
        return (x.view(2, 3, 4).transpose(0, 2)[1:].permute(2, 0, 1) * 2).relu()

    g = check_same(fn, [rand(6, 4)], [compose_views])
    strided = [n for n in g.order() if n.op == "strided"]
    assert len(strided) == 1 and strided[0].inputs == ["x"]
    a = strided[0].attrs
    assert a["shape"] == (2, 3, 3) and a["strides"] == (12, 1, 4) and a["offset"] == 1


def test_elementwise_ops_sink_below_reshapes():
    def fn(x):
        y = x * 2
        return y.view(4, 3).relu()

    g = check_same(fn, [rand(2, 6)], [compose_views, sink_views])
    relu = next(n for n in g.order() if n.op == "relu")
    assert g.producer[relu.inputs[0]].op == "mul"


def test_contiguous_layouts():
    assert is_contiguous_layout((2, 3), (3, 1)) and is_contiguous_layout((1, 3), (99, 1))
    assert not is_contiguous_layout((2, 3), (1, 2))
