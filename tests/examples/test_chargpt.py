"""The character-level GPT demo (gpucore.examples.chargpt) in a tiny configuration (seconds):
the corpus is the standard library's source, the validation loss falls from ln(96), the
attention runs through the fused SDPA ops, the checkpoint reloads into a fresh model with
identical logits and optimizer state, and sampling is deterministic for a seed."""

import math
import os

import numpy as np
import pytest

import gpucore as gc
from gpucore import dispatch
from gpucore.examples import chargpt

TINY = chargpt.Config(
    layers=1,
    d_model=32,
    heads=2,
    context=16,
    batch_size=8,
    steps=60,
    lr=3e-3,
    warmup=10,
    corpus_mb=0.2,
    eval_every=30,
    eval_batches=4,
)


@pytest.fixture(scope="module")
def tiny():
    return chargpt.train(TINY, device="cpu", progress=False)


def test_corpus_is_the_standard_library_source():
    files = chargpt.corpus_files()
    assert files == sorted(files) and all(f.endswith(".py") for f in files)
    assert not any(f"{os.sep}test{os.sep}" in f for f in files)
    ids = chargpt.load_corpus(0.05)
    assert len(ids) == 50_000 and ids.dtype == np.uint8 and ids.max() < len(chargpt.VOCAB)
    text = chargpt.decode(ids[:2000])
    assert "def " in text or "import " in text
    assert chargpt.decode(chargpt.encode("x = 1\n")) == "x = 1\n"


def test_loss_falls_and_attention_is_fused(tiny):
    first, last = tiny.history[0][2], tiny.history[-1][2]
    assert abs(first - math.log(len(chargpt.VOCAB))) < 0.3  # near uniform at the start
    assert last < first - 0.8, tiny.history
    assert tiny.val_loss == last and tiny.steps == TINY.steps
    x, y = chargpt.get_batch(tiny.data[0], 2, TINY.context, np.random.default_rng(0))
    with gc.device_policy("cpu"), dispatch.trace_ops() as ran:
        chargpt.loss_of(tiny.model, x, y).backward()
    ops = {op for op, _, _ in ran}
    assert {"scaled_dot_product_attention", "scaled_dot_product_attention_backward"} <= ops


def test_checkpoint_round_trip(tiny, tmp_path):
    path = str(tmp_path / "chargpt.safetensors")
    assert chargpt.check_round_trip(tiny, path, device="cpu")
    model, opt, ckpt = chargpt.load_checkpoint(path, device="cpu")
    assert ckpt["config"] == chargpt.asdict(TINY) and ckpt["step"] == TINY.steps
    for a, b in zip(model.parameters(), tiny.model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    want = tiny.optimizer.state_dict()["state"]
    got = opt.state_dict()["state"]
    assert sorted(got) == sorted(want)
    for key in want:
        for name, val in want[key].items():
            np.testing.assert_array_equal(np.asarray(got[key][name]), np.asarray(val))


def test_sampling_is_deterministic(tiny):
    with gc.device_policy("cpu"):
        a = chargpt.sample(tiny.model, "def ", 40, temperature=0.8, top_k=5, seed=3)
        b = chargpt.sample(tiny.model, "def ", 40, temperature=0.8, top_k=5, seed=3)
        c = chargpt.sample(tiny.model, "def ", 40, temperature=0.8, top_k=5, seed=4)
    assert a == b and len(a) == 40 and set(a) <= set(chargpt.VOCAB)
    assert a != c
    with pytest.raises(ValueError, match="temperature"):
        chargpt.sample(tiny.model, "x", 2, temperature=0.0)


def test_main_writes_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--steps", "4", "--layers", "1", "--d-model", "16", "--heads", "2", "--context", "8"]
    args += ["--batch-size", "4", "--corpus-mb", "0.05", "--eval-every", "2", "--device", "cpu"]
    args += ["--sample-chars", "20", "--no-progress", "--out", str(out)]
    assert chargpt.main(args) == 0
    text = capsys.readouterr().out
    assert "validation loss" in text and "identical" in text
    assert (out / "chargpt.safetensors").exists()
    assert (out / "chargpt_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
