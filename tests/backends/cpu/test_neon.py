"""The arm64 NEON kernels (cpu/isa/neon.c), checked on any Linux host.

tools/check_neon.sh cross-compiles the extension's Python-free C sources with the NEON kernels
into a static arm64 program (tools/neon_check.c) and runs it under qemu-aarch64: GEMM against the
scalar micro-kernels, the float32 vector math against double libm, the optimizer loops bit for
bit.  The vector math it computed is then compared bit for bit with this machine's AVX2 /
AVX-512 build (isa/vmath.h is written once for all of them).

Skipped only when the cross toolchain is missing; on Debian / Ubuntu:
    apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "tools", "check_neon.sh")
NATIVE_ARM64 = platform.machine().lower() in ("aarch64", "arm64")
APT = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"


def _missing_toolchain() -> str | None:
    """Why the check cannot run here, or None."""
    if shutil.which("bash") is None:
        return "bash not found"
    if NATIVE_ARM64:
        cc = os.environ.get("CC_ARM64") or os.environ.get("CC") or "cc"
        return None if shutil.which(cc) else f"no C compiler ({cc}) on this arm64 host"
    cc = os.environ.get("CC_ARM64", "aarch64-linux-gnu-gcc")
    qemu = os.environ.get("QEMU_ARM64", "qemu-aarch64")
    missing = [t for t in (cc, qemu) if shutil.which(t) is None]
    if not missing:
        # the compiler without the target's C library (libc6-dev-arm64-cross) cannot link -static
        libc = subprocess.run([cc, "-print-file-name=libc.a"], capture_output=True, text=True)
        if not os.path.isabs(libc.stdout.strip()):
            missing.append("the arm64 C library (libc.a)")
    if missing:
        return f"arm64 cross toolchain missing: {', '.join(missing)} (apt-get install {APT})"
    return None


MISSING = _missing_toolchain()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")

VM_OPS = ["EXP", "LOG", "TANH", "SIGMOID", "GELU", "GELU_TANH"]  # neon_check.c's order


@pytest.fixture(scope="module")
def neon_run(tmp_path_factory):
    """Runs tools/check_neon.sh once; returns (completed process, path of the vector-math dump)."""
    dump = tmp_path_factory.mktemp("neon") / "vmath.bin"
    # the native AVX2 rebuild of the script is replaced here by the in-process comparison below
    env = dict(os.environ, NEON_CHECK_X86="0", NEON_CHECK_DUMP=str(dump))
    env.pop("NEON_CHECK_KEEP", None)
    p = subprocess.run(
        ["bash", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    return p, dump


def test_neon_kernels_match_reference_under_qemu(neon_run):
    p, _ = neon_run
    out = p.stdout + p.stderr
    assert p.returncode == 0, f"tools/check_neon.sh failed (exit {p.returncode}):\n{out[-8000:]}"
    assert "neon_check: OK (neon)" in p.stdout, out[-8000:]
    print(p.stdout)


def test_neon_vector_math_is_bitwise_the_hosts(neon_run):
    p, dump = neon_run
    if p.returncode != 0 or not dump.exists():
        pytest.fail("tools/check_neon.sh did not complete (see the test above)")
    from gpucore import _cpu as C

    isa = C.info()["isa"]
    if isa not in ("avx2", "avx512", "neon"):
        pytest.skip(f"this build's float32 vector math is not isa/vmath.h (isa {isa})")
    data = np.fromfile(dump, dtype=np.float32)
    n = data.size // (1 + len(VM_OPS))
    assert data.size == n * (1 + len(VM_OPS)) and n > 600_000
    x = data[:n]
    for i, name in enumerate(VM_OPS):
        neon = data[(i + 1) * n : (i + 2) * n]
        host = np.empty_like(x)
        C.unary(getattr(C, "UNARY_" + name), x, host)
        # NaN payloads may differ between ISAs; everything else, signed zeros included, may not
        nan = np.isnan(host)
        assert np.array_equal(nan, np.isnan(neon)), name
        diff = np.flatnonzero(host.view(np.uint32)[~nan] != neon.view(np.uint32)[~nan])
        assert diff.size == 0, (
            f"{name}: {diff.size} results differ from {isa}, e.g. x={x[~nan][diff[0]]!r}: "
            f"neon {neon[~nan][diff[0]]!r}, {isa} {host[~nan][diff[0]]!r}"
        )
