"""The serving demo (gpucore.examples.serve): a compiled, saved and reloaded digits model answers
requests from several threads with eager gpucore's logits, and the session counts them."""

import numpy as np
import pytest

pytest.importorskip("sklearn")

import gpucore as gc  # noqa: E402
from gpucore.examples import digits, serve  # noqa: E402


@pytest.mark.parametrize("kind", ["cnn", "mlp"])
def test_threads_get_eager_answers(kind):
    gc.manual_seed(0)
    model = digits.build_model(kind).eval()
    _, _, x_test, _ = digits.load_data(0)
    res = serve.serve(model, x_test[:40], threads=4, requests=120, device="cpu")
    assert res["mismatches"] == []
    assert res["stats"]["calls"] == 120 and (res["answers"] >= 0).all()
    with gc.no_grad():
        want = model(gc.tensor(x_test[:40].astype(np.float32))).numpy().argmax(1)
    np.testing.assert_array_equal(res["answers"][:40], want)


def test_main_reports(capsys):
    assert serve.main(["--requests", "50", "--threads", "2", "--checkpoint", "/nonexistent"]) == 0
    out = capsys.readouterr().out
    assert "every answer equals eager gpucore's" in out and "p99" in out
