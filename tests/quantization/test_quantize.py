"""quantize_dynamic (gpucore/quantization/quantize.py): which layers it swaps (types, names,
nesting, the root), copy vs in place, eval mode, the quantized model's outputs against the float
model and against torch.ao.quantization.quantize_dynamic, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import gpucore as gc
from gpucore import nn
from gpucore.errors import ArgumentTypeError, DTypeError
from gpucore.quantization import dynamic, quantize_dynamic

pytestmark = [  # torch's deprecation notices for its quantized tensors and torch.ao
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(64, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        return self.norm(x + self.fc2(self.act(self.fc1(x))))


def _model(seed=0):
    gc.manual_seed(seed)
    return nn.Sequential(Block(), Block(), nn.Linear(32, 10))


def test_every_linear_is_swapped_and_the_rest_kept():
    model = _model()
    q = quantize_dynamic(model, {nn.Linear}, dtype=gc.qint8)
    kinds = {name: type(m) for name, m in q.named_modules()}
    assert kinds["0.fc1"] is dynamic.Linear and kinds["1.fc2"] is dynamic.Linear
    assert kinds["2"] is dynamic.Linear and kinds["0.norm"] is nn.LayerNorm
    assert type(model[2]) is nn.Linear  # the original is untouched (a deep copy was quantized)
    assert not q.training


def test_default_spec_in_place_and_names():
    model = _model()
    out = quantize_dynamic(model, inplace=True)
    assert out is model and type(model[0].fc1) is dynamic.Linear
    only = quantize_dynamic(_model(), {"0.fc2", "2"})
    assert type(only[0].fc2) is dynamic.Linear and type(only[2]) is dynamic.Linear
    assert type(only[0].fc1) is nn.Linear
    root = quantize_dynamic(nn.Linear(3, 4))
    assert type(root) is dynamic.Linear
    assert gc.ao.quantization.quantize_dynamic is quantize_dynamic


def test_outputs_stay_within_quantization_error_of_the_float_model():
    model = _model().eval()
    q = quantize_dynamic(model)
    x = gc.randn(64, 32)
    ref = model(x).detach().numpy()
    got = q(x).numpy()
    cos = float((ref * got).sum() / np.linalg.norm(ref) / np.linalg.norm(got))
    assert cos > 0.9995 and np.abs(ref - got).max() < 0.05


def test_a_quantized_state_dict_saves_at_a_quarter_and_round_trips(tmp_path):
    gc.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256))
    q = quantize_dynamic(model)
    gc.save(model.state_dict(), tmp_path / "f32.gcs")
    gc.save(q.state_dict(), tmp_path / "int8.gcs")
    ratio = (tmp_path / "f32.gcs").stat().st_size / (tmp_path / "int8.gcs").stat().st_size
    assert 3.5 < ratio < 4.1
    fresh = quantize_dynamic(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256)))
    fresh.load_state_dict(gc.load(tmp_path / "int8.gcs"))
    x = gc.randn(5, 256)
    np.testing.assert_array_equal(fresh(x).numpy(), q(x).numpy())


@pytest.mark.parametrize(
    "kw,exc,match",
    [
        (dict(dtype=gc.float16), DTypeError, "qint8"),
        (dict(dtype=gc.quint8), DTypeError, "qint8"),
        (dict(qconfig_spec={nn.Conv2d}), ValueError, "Conv2d has no dynamically quantized"),
        (dict(qconfig_spec={3}), ArgumentTypeError, "qconfig_spec entries"),
        (dict(qconfig_spec=nn.Linear), ArgumentTypeError, "set of module types"),
        (dict(mapping=[nn.Linear]), ArgumentTypeError, "mapping"),
    ],
)
def test_bad_arguments_name_the_function(kw, exc, match):
    with pytest.raises(exc, match=match) as ei:
        quantize_dynamic(_model(), **kw)
    assert "quantize_dynamic()" in str(ei.value)
    with pytest.raises(ArgumentTypeError, match="quantize_dynamic"):
        quantize_dynamic(lambda x: x)


def test_close_to_pytorch_quantize_dynamic():
    torch = pytest.importorskip("torch")
    gc.manual_seed(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16)).eval()
    tm = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 16))
    with torch.no_grad():
        for i in (0, 2):
            tm[i].weight.copy_(torch.from_numpy(model[i].weight.detach().numpy()))
            tm[i].bias.copy_(torch.from_numpy(model[i].bias.detach().numpy()))
    tq = torch.ao.quantization.quantize_dynamic(tm, {torch.nn.Linear}, dtype=torch.qint8)
    ours = quantize_dynamic(model, {nn.Linear}, dtype=gc.qint8)
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    ref = model(gc.from_numpy(x)).detach().numpy()
    got = ours(gc.from_numpy(x)).numpy()
    theirs = tq(torch.from_numpy(x)).detach().numpy()
    # PyTorch's default: per-tensor weights and 7-bit activations (reduce_range); gpucore's
    # per-channel weights and full 8-bit activations are at least as accurate
    err, terr = np.abs(got - ref).max(), np.abs(theirs - ref).max()
    assert err <= terr * 1.25 and np.abs(got - theirs).max() <= err + terr


def test_attention_out_proj_stays_float_like_pytorch_and_the_layer_runs():
    # PyTorch leaves MultiheadAttention.out_proj (a NonDynamicallyQuantizableLinear) in float
    torch = pytest.importorskip("torch")
    tq = torch.ao.quantization.quantize_dynamic(
        torch.nn.TransformerEncoderLayer(8, 2, 16).eval(), {torch.nn.Linear}, dtype=torch.qint8
    )
    gc.manual_seed(0)
    model = nn.TransformerEncoderLayer(8, 2, 16).eval()
    q = quantize_dynamic(model, {nn.Linear}, dtype=gc.qint8)
    for m, float_linear in ((tq, torch.nn.Linear), (q, nn.Linear)):
        assert type(m.self_attn.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
        assert isinstance(m.self_attn.out_proj, float_linear)
        assert repr(m.linear1).startswith("DynamicQuantizedLinear(")
    x = gc.randn(3, 2, 8)
    ref, got = model(x).detach().numpy(), q(x).detach().numpy()
    assert np.abs(ref - got).max() < 0.05


def test_attention_calls_an_out_proj_swapped_for_a_quantized_module():
    gc.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2).eval()
    x = gc.randn(3, 2, 8)
    ref, ref_w = mha(x, x, x)
    mha.out_proj = dynamic.Linear.from_float(mha.out_proj)
    got, got_w = mha(x, x, x)
    np.testing.assert_allclose(got_w.detach().numpy(), ref_w.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), atol=0.02)
