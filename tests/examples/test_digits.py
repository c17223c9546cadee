"""The digits demo (gpucore.examples.digits): it reaches its accuracy targets with fewer epochs
than the demo's default on the CPU, and its checkpoint reloads into a fresh model with identical
predictions. Needs scikit-learn (it ships the data set; in the test extra)."""

import io

import numpy as np
import pytest

pytest.importorskip("sklearn")

from gpucore.examples import digits  # noqa: E402

# Fewer epochs than the defaults (8 and 15); accuracy with these over seeds 0-4 on the CPU:
# CNN 4 epochs 97.2-98.9%, MLP 5 epochs 96.1-97.5%.
CNN_EPOCHS = 4
MLP_EPOCHS = 5


@pytest.fixture(scope="module")
def cnn():
    return digits.train("cnn", epochs=CNN_EPOCHS, seed=0, device="cpu", progress=False)


def test_split_is_deterministic_and_held_out():
    a = digits.load_data(0)
    b = digits.load_data(0)
    c = digits.load_data(1)
    assert [len(t) for t in a] == [1438, 1438, 359, 359]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[3], c[3])
    assert a[0].shape[1:] == (1, 8, 8) and a[0].dtype == np.float32
    assert a[1].dtype == np.int64
    assert abs(float(a[0].mean())) < 1e-4  # standardised with the training set's statistics


def test_cnn_reaches_target_with_fewer_epochs_on_cpu(cnn):
    assert cnn.epochs == CNN_EPOCHS < digits.DEFAULTS["cnn"]["epochs"]
    assert cnn.test_accuracy >= digits.DEFAULTS["cnn"]["target"], cnn.history
    assert cnn.history[-1]["loss"] < cnn.history[0]["loss"]
    # every op of the traced step ran in the C extension
    assert cnn.trace and {be for _, be, _ in cnn.trace} == {"cpu"}
    assert {"conv2d", "matmul", "adam_step"} <= {op for op, _, _ in cnn.trace}


def test_mlp_reaches_target_with_fewer_epochs_on_cpu():
    res = digits.train("mlp", epochs=MLP_EPOCHS, seed=0, device="cpu", progress=False)
    assert res.test_accuracy >= digits.DEFAULTS["mlp"]["target"], res.history


def test_checkpoint_round_trip_gives_identical_predictions(cnn, tmp_path):
    path = str(tmp_path / "digits_cnn.safetensors")
    identical, n = digits.check_round_trip(cnn, path, device="cpu")
    assert identical and n == 359
    model, opt, ckpt = digits.load_checkpoint(path, device="cpu")
    assert ckpt["epoch"] == CNN_EPOCHS and ckpt["kind"] == "cnn"
    x_test = cnn.data[2]
    np.testing.assert_array_equal(digits.predict(model, x_test), digits.predict(cnn.model, x_test))
    # the optimizer state came back too (same step counts and moments)
    want, got = cnn.optimizer.state_dict()["state"], opt.state_dict()["state"]
    assert want.keys() == got.keys()
    for k in want:
        for name, v in want[k].items():
            g = got[k][name]
            if hasattr(v, "numpy"):
                np.testing.assert_array_equal(g.numpy(), v.numpy())
            else:
                assert g == v


def test_training_is_deterministic_for_a_seed():
    a = digits.train("mlp", epochs=1, seed=3, device="cpu", progress=False)
    b = digits.train("mlp", epochs=1, seed=3, device="cpu", progress=False)
    x = a.data[2]
    np.testing.assert_array_equal(digits.predict(a.model, x), digits.predict(b.model, x))


def test_main_writes_checkpoint_and_reports(tmp_path, capsys):
    rc = digits.main(
        [
            "--model",
            "mlp",
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--no-progress",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert (tmp_path / "digits_mlp.safetensors").is_file()
    assert "predictions identical on all 359 test images" in out
    assert "large ops" in out and "small ops" in out and "adam_step" in out


def test_text_bar_without_tqdm():
    f = io.StringIO()  # not a terminal: one finished line
    bar = digits._TextBar(3, "epoch 1/1", file=f)
    for _ in range(3):
        bar.set_postfix_str("loss 0.5")
        bar.update(1)
    bar.close()
    line = f.getvalue()
    assert line.count("\n") == 1 and "3/3" in line and "loss 0.5" in line


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind"):
        digits.train("resnet", progress=False)
    with pytest.raises(ValueError, match="device"):
        digits.train("mlp", epochs=1, device="gpu", progress=False)


def test_demo_trains_on_vulkan_device(vulkan, tmp_path):
    res = digits.train("mlp", epochs=1, seed=0, device="vulkan", progress=False)
    assert "vulkan" in {be for _, be, _ in res.trace}
    assert res.history[-1]["loss"] < 1.5  # it learns (CPU: 1.14 after one epoch)
    identical, _ = digits.check_round_trip(res, str(tmp_path / "m.safetensors"), "vulkan")
    assert identical
