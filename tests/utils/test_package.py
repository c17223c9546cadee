"""gpucore.utils.data is importable every way PyTorch users reach torch.utils.data, and has
PyTorch's public names (DataPipes aside: PyTorch deprecated them)."""

import importlib

import pytest

import gpucore

DATAPIPES = {
    "DFIterDataPipe",
    "DataChunk",
    "IterDataPipe",
    "MapDataPipe",
    "_DatasetKind",
    "argument_validation",
    "functional_datapipe",
    "guaranteed_datapipes_determinism",
    "non_deterministic",
    "runtime_validation",
    "runtime_validation_disabled",
}


def test_import_paths():
    data = importlib.import_module("gpucore.utils.data")
    assert gpucore.utils.data is data
    from gpucore.utils.data.dataloader import DataLoader, default_collate

    assert DataLoader is data.DataLoader and default_collate is data.default_collate
    for name in data.__all__:
        assert getattr(data, name) is not None


def test_distributed_sampler_is_a_sampler():
    data = gpucore.utils.data
    assert data.DistributedSampler is data.distributed.DistributedSampler
    assert issubclass(data.DistributedSampler, data.Sampler)


def test_pytorchs_public_names_exist():
    torch = pytest.importorskip("torch")
    ours = gpucore.utils.data
    missing = [n for n in torch.utils.data.__all__ if n not in DATAPIPES and not hasattr(ours, n)]
    assert missing == []
