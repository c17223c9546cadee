"""TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and
Transformer against PyTorch from the same state_dict, in eval mode: outputs, input and parameter
gradients within 1e-5 (float32) and 1e-10 (float64), with masks, causal, batch_first,
norm_first, gelu/callable activations and bias=False; generate_square_subsequent_mask; errors."""

import copy
import pickle

import numpy as np
import pytest

import gpucore
import gpucore.nn as nn

torch = pytest.importorskip("torch")
# torch's own advice about nested tensors and mixed mask types, not about gpucore
pytestmark = [
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
    pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask"),
]

TOL = {"float32": 1e-5, "float64": 1e-10}
D_MODEL, NHEAD, FF = 8, 2, 16


def _build(name: str, dtype: str, **kw):
    """The same module in torch and gpucore, torch's weights loaded into ours (eval mode)."""
    torch.manual_seed(0)
    layer_kw = {"d_model": D_MODEL, "nhead": NHEAD, "dim_feedforward": FF, **kw}
    if name == "Transformer":
        layer_kw.update(num_encoder_layers=2, num_decoder_layers=2)
        pair = (torch.nn.Transformer(**layer_kw), nn.Transformer(**layer_kw))
    elif name in ("TransformerEncoder", "TransformerDecoder"):
        sub = name + "Layer"
        pair = tuple(
            getattr(lib, name)(
                getattr(lib, sub)(**layer_kw), num_layers=2, norm=lib.LayerNorm(D_MODEL)
            )
            for lib in (torch.nn, nn)
        )
    else:
        pair = (getattr(torch.nn, name)(**layer_kw), getattr(nn, name)(**layer_kw))
    theirs, ours = pair
    theirs = theirs.to(getattr(torch, dtype)).eval()
    ours = ours.to(getattr(gpucore, dtype)).eval()
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict(
        {k: gpucore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return ours, theirs


def _close(ours, theirs, tol, what=""):
    a, b = ours.detach().numpy(), theirs.detach().numpy()
    assert a.shape == b.shape, what
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=what)


def _inputs(rng, dtype, shapes):
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return (
        [gpucore.tensor(a, requires_grad=True) for a in arrays],
        [torch.tensor(a, requires_grad=True) for a in arrays],
    )


def _check_backward(out, ref, ours, theirs, gins, tins, rng, tol):
    g = rng.standard_normal(ref.shape).astype(str(ref.dtype).split(".")[1])
    out.backward(gpucore.tensor(g))
    ref.backward(torch.tensor(g))
    for i, (a, b) in enumerate(zip(gins, tins)):
        _close(a.grad, b.grad, tol, f"grad of input {i}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        _close(p.grad, theirs_params[name].grad, tol, f"grad of {name}")


def _masks(kind: str, n: int, s: int, rng, dtype) -> dict:
    """An attention mask [s, s] and a key padding mask [n, s] as numpy arrays (bool: True is
    not attended; "causal": float masks and the is_causal hint); {} for "none"."""
    if kind == "none":
        return {}
    causal = np.triu(np.full((s, s), -np.inf, dtype=dtype), 1)
    kpm = np.zeros((n, s), bool)
    kpm[1, -1] = True
    if kind == "bool":
        m = rng.random((s, s)) > 0.7  # True: not attended; the diagonal stays open
        np.fill_diagonal(m, False)
        return {"mask": m, "kpm": kpm}
    return {"mask": causal, "kpm": kpm.astype(dtype) * -1e9, "causal": True}


CONFIGS = [
    {},
    {"batch_first": True},
    {"norm_first": True},
    {"activation": "gelu", "bias": False},
    {"layer_norm_eps": 1e-3},
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("masks", ["none", "bool", "causal"])
@pytest.mark.parametrize("name", ["TransformerEncoderLayer", "TransformerEncoder"])
def test_encoder_matches_torch(name, masks, cfg, dtype):
    rng = np.random.default_rng(0)
    ours, theirs = _build(name, dtype, dropout=0.1, **cfg)
    n, s = 3, 5
    shape = (n, s, D_MODEL) if cfg.get("batch_first") else (s, n, D_MODEL)
    gins, tins = _inputs(rng, dtype, [shape])
    m = _masks(masks, n, s, rng, dtype)
    mask_name = "src_mask" if name.endswith("Layer") else "mask"
    ok, tk = {}, {}
    if m:
        ok[mask_name], tk[mask_name] = gpucore.tensor(m["mask"]), torch.tensor(m["mask"])
        ok["src_key_padding_mask"] = gpucore.tensor(m["kpm"])
        tk["src_key_padding_mask"] = torch.tensor(m["kpm"])
        if m.get("causal"):
            ok["is_causal"] = tk["is_causal"] = True
    out = ours(gins[0], **ok)
    ref = theirs(tins[0], **tk)
    tol = TOL[dtype]
    _close(out, ref, tol, "output")
    _check_backward(out, ref, ours, theirs, gins, tins, rng, tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cfg", CONFIGS[:4])
@pytest.mark.parametrize("masks", ["none", "causal"])
@pytest.mark.parametrize("name", ["TransformerDecoderLayer", "TransformerDecoder", "Transformer"])
def test_decoder_and_transformer_match_torch(name, masks, cfg, dtype):
    rng = np.random.default_rng(1)
    ours, theirs = _build(name, dtype, **cfg)
    n, t, s = 2, 4, 6
    bf = cfg.get("batch_first")
    shp = (lambda L: (n, L, D_MODEL)) if bf else (lambda L: (L, n, D_MODEL))
    gins, tins = _inputs(
        rng, dtype, [shp(s), shp(t)] if name == "Transformer" else [shp(t), shp(s)]
    )
    ok, tk = {}, {}
    if masks == "causal":
        tm = nn.Transformer.generate_square_subsequent_mask(t, dtype=getattr(gpucore, dtype))
        ok["tgt_mask"] = tm
        tk["tgt_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(
            t, dtype=getattr(torch, dtype)
        )
        ok["tgt_is_causal"] = tk["tgt_is_causal"] = True
        mk = np.zeros((n, s), bool)
        mk[0, -2:] = True
        ok["memory_key_padding_mask"] = gpucore.tensor(mk)
        tk["memory_key_padding_mask"] = torch.tensor(mk)
        mm = rng.standard_normal((t, s)).astype(dtype)
        ok["memory_mask"], tk["memory_mask"] = gpucore.tensor(mm), torch.tensor(mm)
    out = ours(*gins, **ok)
    ref = theirs(*tins, **tk)
    tol = TOL[dtype]
    _close(out, ref, tol, "output")
    _check_backward(out, ref, ours, theirs, gins, tins, rng, tol)


def test_callable_activation_and_train_mode_dropout():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, activation=nn.functional.silu)
    x = gpucore.randn(4, 2, 8)
    layer.train()
    with gpucore.no_grad():
        gpucore.manual_seed(0)
        a = layer(x)
        gpucore.manual_seed(0)
        b = layer(x)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        layer.eval()
        assert not np.allclose(a.numpy(), layer(x).numpy())
        assert np.isfinite(layer(x).numpy()).all()


def test_generate_square_subsequent_mask_and_layers_are_copies():
    m = nn.Transformer.generate_square_subsequent_mask(4)
    ref = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(m.numpy(), ref.numpy())
    assert m.dtype is gpucore.float32
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), num_layers=3)
    assert len(enc.layers) == 3 and enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    assert len(list(enc.parameters())) == 3 * len(list(enc.layers[0].parameters()))


def test_transformer_errors():
    with pytest.raises(RuntimeError, match="relu/gelu"):
        nn.TransformerEncoderLayer(8, 2, activation="tanh")
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerEncoderLayer(8, 3)
    model = nn.Transformer(8, 2, 1, 1, 16)
    with pytest.raises(RuntimeError, match="batch number"):
        model(gpucore.zeros(5, 2, 8), gpucore.zeros(4, 3, 8))
    with pytest.raises(RuntimeError, match="d_model"):
        model(gpucore.zeros(5, 2, 8), gpucore.zeros(4, 2, 6))


def test_layers_pickle_and_deepcopy():
    model = nn.Transformer(8, 2, 1, 1, 16, activation="gelu").eval()
    src, tgt = gpucore.randn(5, 2, 8), gpucore.randn(4, 2, 8)
    with gpucore.no_grad():
        ref = model(src, tgt).numpy()
        for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            np.testing.assert_array_equal(clone(src, tgt).numpy(), ref)


def test_training_steps_match_torch():
    """A causal encoder language model (embedding, 2 pre-norm layers, a head) trained 3 SGD
    steps from torch's weights: the losses follow PyTorch's."""

    def build_torch():
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.0, batch_first=True, norm_first=True
        )
        return torch.nn.ModuleDict(
            {
                "emb": torch.nn.Embedding(11, 8),
                "enc": torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
                "head": torch.nn.Linear(8, 11),
            }
        )

    theirs = build_torch().double()
    ours = nn.ModuleDict(
        {
            "emb": nn.Embedding(11, 8),
            "enc": nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    8, 2, 16, dropout=0.0, batch_first=True, norm_first=True
                ),
                2,
            ),
            "head": nn.Linear(8, 11),
        }
    ).double()
    ours.load_state_dict(
        {k: gpucore.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    tokens = np.random.default_rng(3).integers(0, 11, size=(4, 7))
    losses = []
    for lib, model in ((torch, theirs), (gpucore, ours)):
        opt = lib.optim.SGD(model.parameters(), lr=0.5)
        x, y = lib.tensor(tokens[:, :-1]), lib.tensor(tokens[:, 1:])
        mask = (
            torch.nn.Transformer if lib is torch else nn.Transformer
        ).generate_square_subsequent_mask(6, dtype=lib.float64)
        run = []
        for _ in range(3):
            h = model["enc"](model["emb"](x), mask=mask, is_causal=True)
            loss = lib.nn.functional.cross_entropy(model["head"](h).reshape(-1, 11), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            run.append(loss.item())
        losses.append(run)
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-9)
    assert losses[0][-1] < losses[0][0]
