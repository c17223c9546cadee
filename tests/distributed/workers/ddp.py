"""DistributedDataParallel against one process training on the whole batch (run by test_ddp.py
under mpirun). Prints ``rank R PASS <check>`` per check."""

import os
import sys
import tempfile

import numpy as np

import gpucore as gc
import gpucore.distributed as dist
from gpucore import nn
from gpucore.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group()
R, N = dist.get_rank(), dist.get_world_size()
DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"
B, STEPS = 24, 10
rng = np.random.default_rng(0)
X = rng.standard_normal((STEPS, B, 1, 8, 8)).astype(np.float32)
Y = rng.integers(0, 4, (STEPS, B))
LO, HI = R * B // N, (R + 1) * B // N


def ok(name):
    print(f"rank {R} PASS {name}", flush=True)


class Branchy(nn.Module):
    """A CNN whose ``extra`` layer is used only on even steps (unused parameters)."""

    def __init__(self, norm, extra):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.norm = norm(4)
        self.fc = nn.Linear(4 * 8 * 8, 4)
        self.extra = nn.Linear(4, 4) if extra else None

    def forward(self, x, use_extra=False):
        h = nn.functional.relu(self.norm(self.conv(x)))
        out = self.fc(h.flatten(1))
        return self.extra(out) if use_extra else out


def build(seed, norm=None, extra=False):
    gc.manual_seed(seed)
    m = Branchy(norm or (lambda c: nn.Identity()), extra)
    return m.to(DEVICE) if DEVICE != "cpu" else m


def batch(s, lo=0, hi=B):
    x, y = gc.tensor(X[s, lo:hi]), gc.tensor(Y[s, lo:hi])
    return (x.to(DEVICE), y.to(DEVICE)) if DEVICE != "cpu" else (x, y)


def optimizer(params, sgd=False):
    return gc.optim.SGD(params, lr=0.05, momentum=0.9) if sgd else gc.optim.Adam(params, lr=0.01)


def train_single(model, steps, accum=1, branch=False, lo=0, hi=B, sgd=False):
    opt = optimizer(model.parameters(), sgd)
    for s in range(steps):
        opt.zero_grad()
        x, y = batch(s, lo, hi)
        loss = nn.functional.cross_entropy(model(x, branch and s % 2 == 0), y)
        loss.backward()
        opt.step()
    return model


def train_ddp(model, steps, accum=1, branch=False, sgd=False, **kw):
    ddp = DDP(model, bucket_cap_mb=0.002, **kw)  # ~500 floats: several buckets
    opt = optimizer(ddp.parameters(), sgd)
    for s in range(steps):
        opt.zero_grad()
        micro = np.array_split(np.arange(LO, HI), accum)
        for i, idx in enumerate(micro):
            x, y = batch(s, idx[0], idx[-1] + 1)
            ctx = ddp.no_sync() if i < accum - 1 else _null()
            with ctx:
                loss = nn.functional.cross_entropy(
                    ddp(x, branch and s % 2 == 0), y, reduction="sum"
                )
                (loss / (HI - LO)).backward()
        for p in ddp.parameters():  # each rank's mean-of-shard gradient: scale to the batch
            if p.grad is not None:
                p.grad.mul_((HI - LO) * N / B)
        opt.step()
    return ddp


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def state(m):
    return {k: v.cpu().numpy().copy() for k, v in m.state_dict().items()}


def close(a, b, rtol=1e-5, atol=1e-6):
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=atol, err_msg=k)


def same_everywhere(st):
    everyone = [None] * N
    dist.all_gather_object(everyone, st)
    for other in everyone:
        for k in st:
            np.testing.assert_array_equal(other[k], st[k], err_msg=k)


ref = state(train_single(build(0), STEPS))
# rank 0's weights reach every rank: the other ranks start from other seeds
ddp = train_ddp(build(0 if R == 0 else 50 + R), STEPS)
got = state(ddp.module)
close(got, ref)
same_everywhere(got)
assert list(ddp.state_dict())[0].startswith("module.")
ok("matches one process")

again = state(train_ddp(build(0), STEPS).module)
for k in got:
    np.testing.assert_array_equal(again[k], got[k], err_msg=k)
ok("bitwise reproducible")

close(state(train_ddp(build(0), STEPS, accum=3).module), ref)
ok("no_sync accumulation")

ref_branch = state(train_single(build(1, extra=True), STEPS, branch=True))
unused = train_ddp(build(1, extra=True), STEPS, branch=True, find_unused_parameters=True)
close(state(unused.module), ref_branch)
try:
    train_ddp(build(1, extra=True), 2, branch=True)
    raise AssertionError("an unused parameter went unnoticed")
except dist.DistError as e:
    assert "extra.weight" in str(e) and "find_unused_parameters=True" in str(e), str(e)
ok("unused parameters")


def train_shards_bn(model, steps):
    """What DDP does with plain BatchNorm, in one process: each shard is normalized with its
    own statistics, gradients are summed over the shards, and the running statistics are those
    rank 0's shard produced from the buffers every forward starts from (rank 0's)."""
    opt = optimizer(model.parameters(), sgd=True)
    for s in range(steps):
        opt.zero_grad()
        start = {k: v.clone() for k, v in model.named_buffers()}
        after0 = None
        for r in range(N):
            for k, v in model.named_buffers():
                v.copy_(start[k])
            x, y = batch(s, r * B // N, (r + 1) * B // N)
            (nn.functional.cross_entropy(model(x), y, reduction="sum") / B).backward()
            if r == 0:
                after0 = {k: v.clone() for k, v in model.named_buffers()}
        for k, v in model.named_buffers():
            v.copy_(after0[k])
        opt.step()
    return model


# With BatchNorm, SGD: BatchNorm makes conv.bias's exact gradient 0, and Adam would turn either
# run's rounding noise in it into full-size steps.
# BatchNorm: with broadcast_buffers the statistics are rank 0's (its shard), as PyTorch's
bn_ref = state(train_shards_bn(build(2, nn.BatchNorm2d), STEPS))
bn_ddp = train_ddp(build(2, nn.BatchNorm2d), STEPS, sgd=True)
bn_ddp.eval()
bn_ddp(batch(0)[0])  # a forward starts by taking rank 0's buffers; eval updates none
bn = {k: v for k, v in state(bn_ddp.module).items() if "running" in k}
same_everywhere(bn)
close(state(bn_ddp.module), bn_ref)
# SyncBatchNorm: statistics of the whole batch, so the same model as one process
sync_ref = state(train_single(build(3, nn.BatchNorm2d), STEPS, sgd=True))
model = nn.SyncBatchNorm.convert_sync_batchnorm(build(3, nn.BatchNorm2d))
assert isinstance(model.norm, nn.SyncBatchNorm)
close(state(train_ddp(model, STEPS, sgd=True).module), sync_ref, rtol=1e-4, atol=1e-5)
ok("buffers and SyncBatchNorm")

path = os.path.join(
    tempfile.gettempdir(),
    f"gpucore_ddp_{os.environ.get('OMPI_COMM_WORLD_JOBID', os.getppid())}.safetensors",
)
if R == 0:
    gc.save(ddp.module.state_dict(), path)
dist.barrier()
fresh = build(99)
fresh.load_state_dict(gc.load(path))
close(state(fresh), got, rtol=0, atol=0)
dist.barrier()
if R == 0:
    os.remove(path)
ok("checkpoint")

try:
    DDP(nn.Linear(3, 3 + R))
    raise AssertionError("different models were accepted")
except dist.DistError as e:
    assert "different models" in str(e) and "rank 1" in str(e), str(e)
ok("replica check")
dist.destroy_process_group()
