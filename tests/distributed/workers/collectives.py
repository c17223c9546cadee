"""Every collective on every rank against numpy (run by test_collectives.py under mpirun).

Each rank's input is a function of its rank, so every rank computes the expected result of the
whole job itself. Prints ``rank R PASS <check>`` per check."""

import sys

import numpy as np

import gpucore as gc
import gpucore.distributed as dist

dist.init_process_group(backend="mpi")
R, N = dist.get_rank(), dist.get_world_size()
DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cpu"


def data(rank, shape=(3, 5), dtype=np.float64):
    rng = np.random.default_rng(100 + rank)
    return (rng.standard_normal(shape) * 4).astype(dtype)


def t(a, dtype=None):
    x = gc.tensor(a, dtype=dtype)
    return x.to(DEVICE) if DEVICE != "cpu" else x


def ok(name):
    print(f"rank {R} PASS {name}", flush=True)


def check_all_reduce(async_op):
    every = [data(r) for r in range(N)]
    refs = {
        "SUM": np.sum(every, 0),
        "AVG": np.mean(every, 0),
        "PRODUCT": np.prod(every, 0),
        "MIN": np.min(every, 0),
        "MAX": np.max(every, 0),
    }
    for name, ref in refs.items():
        x = t(data(R))
        w = dist.all_reduce(x, op=getattr(dist.ReduceOp, name), async_op=async_op)
        if async_op:
            assert isinstance(w, dist.Work) and w.wait() and w.is_completed()
        np.testing.assert_allclose(x.cpu().numpy(), ref, rtol=1e-12, atol=1e-12)
    # float32 through a strided view (packed and unpacked), ints with bit ops, bool as any/all
    base = t(np.stack([data(R, (4,)), data(R, (4,))]).astype(np.float32))
    view = base[:, 1]
    dist.all_reduce(view, async_op=False)
    want = np.sum([data(r, (4,)).astype(np.float32)[1] for r in range(N)], 0)
    np.testing.assert_allclose(base.cpu().numpy()[:, 1], [want, want], rtol=1e-5)
    ints = t(np.array([1 << R, R, 7], dtype=np.int64))
    dist.all_reduce(ints, op=dist.ReduceOp.BOR)
    assert ints.cpu().numpy().tolist() == [(1 << N) - 1, np.bitwise_or.reduce(range(N)), 7]
    flags = gc.tensor([R == 0, True, False])
    dist.all_reduce(flags)  # SUM on bool: any
    assert flags.numpy().tolist() == [True, True, False]
    half = t(np.full(6, R + 1, np.float32)).to(gc.float16)
    dist.all_reduce(half)
    assert half.float().cpu().numpy().tolist() == [N * (N + 1) / 2] * 6
    bf = t(np.full(3, R + 0.5, np.float32)).to(gc.bfloat16)
    dist.all_reduce(bf, op=dist.ReduceOp.MAX)
    assert bf.float().cpu().numpy().tolist() == [N - 0.5] * 3
    ok(f"all_reduce async={async_op}")


def check_rooted(async_op):
    for root in range(N):
        x = t(data(R))
        w = dist.broadcast(x, src=root, async_op=async_op)
        w and w.wait()
        np.testing.assert_array_equal(x.cpu().numpy(), data(root))
        x = t(data(R))
        w = dist.reduce(x, dst=root, op=dist.ReduceOp.MAX, async_op=async_op)
        w and w.wait()
        want = np.max([data(r) for r in range(N)], 0) if R == root else data(R)
        np.testing.assert_array_equal(x.cpu().numpy(), want)
        outs = [t(np.zeros((3, 5))) for _ in range(N)] if R == root else None
        w = dist.gather(t(data(R)), outs, dst=root, async_op=async_op)
        w and w.wait()
        if R == root:
            for r in range(N):
                np.testing.assert_array_equal(outs[r].cpu().numpy(), data(r))
        ins = [t(data(100 + r)) for r in range(N)] if R == root else None
        x = t(np.zeros((3, 5)))
        w = dist.scatter(x, ins, src=root, async_op=async_op)
        w and w.wait()
        np.testing.assert_array_equal(x.cpu().numpy(), data(100 + R))
    ok(f"rooted async={async_op}")


def check_gathers(async_op):
    outs = [t(np.zeros((3, 5))) for _ in range(N)]
    w = dist.all_gather(outs, t(data(R)), async_op=async_op)
    w and w.wait()
    for r in range(N):
        np.testing.assert_array_equal(outs[r].cpu().numpy(), data(r))
    for shape in ((N * 3, 5), (N, 3, 5)):
        out = t(np.zeros(shape))
        w = dist.all_gather_into_tensor(out, t(data(R)), async_op=async_op)
        w and w.wait()
        np.testing.assert_array_equal(
            out.cpu().numpy().reshape(N, 3, 5), np.stack([data(r) for r in range(N)])
        )
    full = [data(r, (N * 2, 3)) for r in range(N)]
    out = t(np.zeros((2, 3)))
    w = dist.reduce_scatter_tensor(out, t(full[R]), op=dist.ReduceOp.SUM, async_op=async_op)
    w and w.wait()
    np.testing.assert_allclose(out.cpu().numpy(), np.sum(full, 0)[2 * R : 2 * R + 2], rtol=1e-12)
    ok(f"gathers async={async_op}")


def check_point_to_point():
    nxt, prv = (R + 1) % N, (R - 1) % N
    x = t(np.zeros((3, 5)))
    send = dist.isend(t(data(R)), dst=nxt)
    src = dist.recv(x, src=prv)
    send.wait()
    assert src == prv
    np.testing.assert_array_equal(x.cpu().numpy(), data(prv))
    if N > 1:
        if R == 0:
            dist.send(t(np.zeros(4)), dst=1)
        elif R == 1:
            try:
                dist.recv(t(np.zeros(5)), src=0)
                raise AssertionError("recv of a smaller message was not detected")
            except dist.DistError as e:
                assert "bytes" in str(e)
    ok("point_to_point")


def check_objects_groups_errors():
    objs = [None] * N
    dist.all_gather_object(objs, {"rank": R, "sq": R * R})
    assert objs == [{"rank": r, "sq": r * r} for r in range(N)]
    lst = [R, "x"] if R == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "x"]
    evens = dist.new_group([r for r in range(N) if r % 2 == 0])
    if R % 2 == 0:
        assert dist.get_world_size(evens) == (N + 1) // 2 and dist.get_rank(evens) == R // 2
        x = t(np.array([float(R)]))
        dist.all_reduce(x, group=evens)
        assert x.cpu().numpy()[0] == sum(range(0, N, 2))
    else:
        assert evens is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(evens) == -1
    try:  # shapes that differ between ranks: detected, reported on every rank
        dist.all_reduce(t(np.zeros(R + 1)))
        raise AssertionError("mismatched shapes were not detected")
    except dist.DistError as e:
        assert all(f"rank {r}: all_reduce [({r + 1},)" in str(e) for r in range(N)), str(e)
    try:
        dist.all_reduce(t(np.zeros(2, np.int64)), op=dist.ReduceOp.AVG)
        raise AssertionError("AVG on integers was accepted")
    except TypeError as e:
        assert "AVG" in str(e)
    dist.barrier()
    ok("objects_groups_errors")


for a in (False, True):
    check_all_reduce(a)
    check_rooted(a)
    check_gathers(a)
check_point_to_point()
check_objects_groups_errors()
dist.destroy_process_group()
assert not dist.is_initialized()
