"""Models exported by torch.onnx.export (the TorchScript exporter, dynamo=False) with random
weights and a dynamic batch: an MLP, the digits CNN, ResNet-18 (its batch norms kept as
BatchNormalization nodes), a BERT-style encoder layer (exact GELU) and a GPT-2-style decoder
block (causal mask, tanh GELU), at opsets 14 and 17, run at two batch sizes on the CPU and on
Vulkan: gpucore's outputs within 1e-4 of onnxruntime's and PyTorch's."""

import io
import math
import warnings

import numpy as np
import pytest
from onnx_cases import assert_close, onnx, ort, rand, run_ort

import gpucore.onnx

torch = pytest.importorskip("torch")
nn = torch.nn


def _resnet18():
    """torchvision's ResNet-18 layout (BasicBlock, [2, 2, 2, 2]), 10 classes."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))  # fmt: skip

        def forward(self, x):
            idt = x if self.down is None else self.down(x)
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + idt)

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]  # fmt: skip
    for cin, cout, stride in ((64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout)]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))
    g = torch.Generator().manual_seed(1)
    for m in model.modules():  # eval-mode statistics that are not the identity
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5, generator=g)
            m.running_var.uniform_(0.5, 2.0, generator=g)
            m.weight.data.uniform_(0.5, 1.5, generator=g)
            m.bias.data.uniform_(-0.5, 0.5, generator=g)
    return model


class Bert(nn.Module):
    """nn.TransformerEncoderLayer, batch first, exact GELU. is_causal=False is passed because
    PyTorch 2.13's tracer otherwise hands scaled_dot_product_attention a Tensor for it."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1,
                                                activation="gelu", batch_first=True)  # fmt: skip

    def forward(self, x):
        return self.layer(x, is_causal=False)


class Gpt(nn.Module):
    """A GPT-2 block: pre-LN, causal self-attention (masked_fill with a tril buffer), tanh
    GELU MLP."""

    def __init__(self, d=32, heads=4, ctx=8):
        super().__init__()
        self.h = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)).view(1, 1, ctx, ctx))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.attn(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.h))
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(nn.functional.gelu(self.fc(self.ln2(x)), approximate="tanh"))


MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(),
                                  nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10)), (64,)),
    "digits_cnn": (lambda: nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
                                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 10)),
                   (1, 8, 8)),
    "resnet18": (_resnet18, (3, 32, 32)),
    "bert_layer": (Bert, (8, 32)),
    "gpt2_block": (Gpt, (8, 32)),
}  # fmt: skip
CASES = [(name, opset) for name in MODELS for opset in (14, 17)]


@pytest.fixture(scope="module")
def exported():
    """{(name, opset): (torch model, ONNX bytes)}, exported once."""
    out = {}
    for name, opset in CASES:
        torch.manual_seed(0)
        build, shape = MODELS[name]
        m = build().eval()
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                m, torch.randn(2, *shape), f, input_names=["x"], output_names=["y"],
                dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, opset_version=opset,
                dynamo=False, do_constant_folding=name != "resnet18",
            )  # fmt: skip
        out[(name, opset)] = (m, f.getvalue())
    return out


def _check(exported, name, opset, device):
    m, data = exported[(name, opset)]
    proto = onnx.load_from_string(data)
    cm = gpucore.onnx.load(data, device=device)
    assert cm.symbols == ["batch"]
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        x = rand(batch, *MODELS[name][1], seed=batch)
        got = cm.run_arrays([x])
        assert_close(got, sess.run(None, {"x": x}))
        with torch.no_grad():
            want = m(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
    return proto, cm


@pytest.mark.parametrize("name, opset", CASES)
def test_cpu(exported, name, opset):
    proto, cm = _check(exported, name, opset, "cpu")
    ops = {n.op for n in cm.graph.order()}
    if name == "resnet18":
        assert "BatchNormalization" in {n.op_type for n in proto.graph.node}
        # batch norms folded, ReLUs and shortcut adds fused into the convolutions
        assert ops <= {"conv2d", "conv2d_act", "max_pool2d", "mean", "strided", "gemm"}, ops
        assert "conv2d_act" in ops
    if name == "bert_layer":  # the passes fused attention, layer norm and GELU
        assert {"attention", "layer_norm"} <= ops and "sign" not in ops  # sign: erf composed
    if name in ("bert_layer", "gpt2_block"):
        for ex in cm.executors():  # each batch size's graph: [B, T, d] @ W + b [-> GELU] fused
            _assert_transformer_fused(
                ex.plan.graph, "gelu" if name == "bert_layer" else "gelu_tanh"
            )


def _assert_transformer_fused(g, gelu):
    """Four products with their bias in the gemm, the MLP's GELU as the first one's epilogue;
    the two residual adds and the views (the heads) the only other nodes beside attention and
    the layer norms."""
    ops = g.op_counts()
    assert set(ops) <= {"gemm", "attention", "layer_norm", "add", "strided", "clone"}, ops
    assert (ops["gemm"], ops["attention"], ops["layer_norm"], ops["add"]) == (4, 1, 2, 2), ops
    gemms = [n for n in g.order() if n.op == "gemm"]
    assert all(len(n.inputs) == 3 for n in gemms)
    # (BERT's attention projections at batch > 1 read and write nn.MultiheadAttention's
    # sequence-first layout: a transpose, not a reshape, of the batch-first tensors)
    assert all(len(g.tensors[n.output].shape) == 3 for n in gemms[2:])
    assert [n.attrs["act"] for n in gemms] == [None, None, gelu, None]


@pytest.mark.parametrize("name, opset", CASES)
def test_vulkan(vulkan, exported, name, opset):
    _check(exported, name, opset, "vulkan")


def test_the_reference_agrees_with_itself(exported):
    """The onnxruntime reference used above runs the graph as exported."""
    _, data = exported[("mlp", 17)]
    x = rand(2, 64)
    assert_close(run_ort(onnx.load_from_string(data), {"x": x}),
                 ort.InferenceSession(data).run(None, {"x": x}))  # fmt: skip


def test_a_dynamic_sequence_length(exported):
    """The causal mask buffer sliced to the sequence length stays one graph for every length."""
    m = exported[("gpt2_block", 17)][0]
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            m, torch.randn(2, 8, 32), f, input_names=["x"], output_names=["y"],
            dynamic_axes={"x": {0: "batch", 1: "seq"}}, opset_version=17, dynamo=False,
        )  # fmt: skip
    cm = gpucore.onnx.load(f.getvalue(), device="cpu")
    assert cm.symbols == ["batch", "seq"]
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    for batch, seq in ((1, 5), (3, 8), (2, 1)):
        x = rand(batch, seq, 32, seed=seq)
        assert_close(cm.run_arrays([x]), sess.run(None, {"x": x}))
