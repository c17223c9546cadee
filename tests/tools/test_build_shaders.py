"""The shipped SPIR-V matches its GLSL sources (tools/build_shaders.py)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Shader-private sections of cpu/opcodes.def: shader -> {OPCODES key: the Vulkan kernel module
# that reads it}; the section's macro is GC_<KEY>.
_PRIVATE = {
    "reduce.comp": {"reduce_op": "reduce", "reduce_flag": "reduce"},
    "softmax.comp": {"softmax_op": "nn", "softmax_mode": "nn"},
    "optim.comp": {"optim_variant": "optim", "optim_flag": "optim"},
    "pool.comp": {"pool_mode": "pool"},
    "im2col.comp": {"im2col_mode": "pool"},
    "gemm.comp": {
        "gemm_flags": "gemm",
        "gemm_variant": "gemm",
        "gemm_a_mode": "gemm",
        "gemm_b_mode": "gemm",
    },
    "random.comp": {"random_mode": "random"},
}


def _load():
    spec = importlib.util.spec_from_file_location(
        "build_shaders", ROOT / "tools" / "build_shaders.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_shader_is_compiled_and_fresh():
    bs = _load()
    comps = sorted((ROOT / "shaders").glob("*.comp"))
    assert comps, "no shaders found"
    stale = [c.name for c in comps if bs.stale(c)]
    assert stale == [], f"stale SPIR-V, run python tools/build_shaders.py: {stale}"


def test_staleness_follows_the_source(tmp_path, monkeypatch):
    bs = _load()
    src = tmp_path / "shaders"
    out = tmp_path / "spirv"
    src.mkdir()
    out.mkdir()
    (src / "inc.glsl").write_text("// v1\n")
    comp = src / "k.comp"
    comp.write_text('#include "inc.glsl"\nvoid main() {}\n')
    monkeypatch.setattr(bs, "OUT", out)
    assert bs.stale(comp)
    (out / "k.spv").write_bytes(b"x")
    (out / "k.spv.sha256").write_text(bs.source_digest(comp))
    assert not bs.stale(comp)
    (src / "inc.glsl").write_text("// v2\n")  # an include changed: stale again
    assert bs.stale(comp)


@pytest.mark.skipif(shutil.which("spirv-val") is None, reason="spirv-tools not installed")
def test_shipped_spirv_validates():
    for spv in sorted((ROOT / "gpucore" / "backends" / "vulkan" / "spirv").glob("*.spv")):
        res = subprocess.run(
            ["spirv-val", "--target-env", "vulkan1.1", str(spv)], capture_output=True, text=True
        )
        assert res.returncode == 0, f"{spv.name}: {res.stdout}{res.stderr}"


def test_an_included_file_from_the_include_dirs_marks_the_shader_stale(tmp_path, monkeypatch):
    bs = _load()
    src, inc, out = tmp_path / "shaders", tmp_path / "cpu", tmp_path / "spirv"
    for d in (src, inc, out):
        d.mkdir()
    (inc / "opcodes.def").write_text("#ifdef GC_UNARY\nGC_UNARY(NEG, neg, 0)\n#endif\n")
    comp = src / "k.comp"
    comp.write_text('#include "opcodes.def"\nvoid main() {}\n')
    monkeypatch.setattr(bs, "OUT", out)
    monkeypatch.setattr(bs, "INCLUDE_DIRS", [inc])
    assert bs.dependencies(comp) == [comp, inc / "opcodes.def"]
    (out / "k.spv").write_bytes(b"x")
    (out / "k.spv.sha256").write_text(bs.source_digest(comp))
    assert not bs.stale(comp)
    (inc / "opcodes.def").write_text("#ifdef GC_UNARY\nGC_UNARY(NEG, neg, 1)\n#endif\n")
    assert bs.stale(comp)  # an op code changed: stale again


def test_the_op_code_shaders_depend_on_opcodes_def():
    bs = _load()
    table = ROOT / "cpu" / "opcodes.def"
    for name in ("unary.comp", "binary.comp", "fused.comp", "gemm.comp", *_PRIVATE):
        assert table in bs.dependencies(ROOT / "shaders" / name), name


def test_every_variant_is_compiled_fresh_and_hashes_its_defines():
    bs = _load()
    rows = bs.variants()
    names = [v.name for v in rows]
    assert len(names) == len(set(names)), "two variants write the same .spv"
    for v in rows:
        assert (ROOT / "shaders" / v.source).is_file(), v
        assert not bs.stale(v), f"stale SPIR-V, run python tools/build_shaders.py: {v.name}"
    shipped = {p.stem for p in (ROOT / "gpucore" / "backends" / "vulkan" / "spirv").glob("*.spv")}
    assert shipped == set(names), "a shipped .spv has no row (or a row no .spv)"
    reduce = ROOT / "shaders" / "reduce.comp"
    assert [v.name for v in bs.variants(reduce)] == ["reduce", "reduce_sg"]
    assert bs.source_digest(reduce, (("SUBGROUP", "0"),)) != bs.source_digest(
        reduce, (("SUBGROUP", "1"),)
    )


def test_the_opcode_table_matches_the_extension_constants():
    from gpucore import _cpu

    ops = _cpu.OPCODES
    for family, prefix in (("unary", "UNARY_"), ("binary", "BINARY_"), ("reduce", "REDUCE_")):
        assert sorted(ops[family].values()) == list(range(len(ops[family])))
        for name, code in ops[family].items():
            assert getattr(_cpu, prefix + name.upper()) == code
    assert {k: v for k, v in ops["strided"].items() if k in ops["binary"]} == ops["binary"]
    assert set(ops["act"]) - {"none"} <= set(ops["unary"])
    arith = {k: v for k, v in ops["binary"].items() if v < ops["binary"]["eq"]}
    assert ops["fused_binary"] == arith


def test_the_shader_private_constants_come_from_opcodes_def():
    from gpucore import _cpu

    ops = _cpu.OPCODES
    kernels = ROOT / "gpucore" / "backends" / "vulkan" / "kernels"
    for shader, sections in _PRIVATE.items():
        text = (ROOT / "shaders" / shader).read_text()
        for key, module in sections.items():
            table = ops[key]
            assert table and all(type(v) is int for v in table.values()), key
            if key.endswith(("_op", "_mode", "_variant")):  # codes: 0 .. count-1, each once
                assert sorted(table.values()) == list(range(len(table))), key
            else:  # flag bits: distinct powers of two
                bits = [v for k, v in table.items() if k != "ACT_SHIFT"]
                assert all(b > 0 and b & (b - 1) == 0 for b in bits), key
                assert len(set(bits)) == len(bits), key
            # the shader declares them from the table, the kernel module reads OPCODES
            assert f"#define GC_{key.upper()}(NAME, value)" in text, (shader, key)
            assert f'OPCODES["{key}"]' in (kernels / f"{module}.py").read_text(), (module, key)
    softmax = ops["softmax_op"]  # softmax.comp: FORWARD = OP < SOFTMAX_BACKWARD
    assert max(softmax["SOFTMAX"], softmax["LOG_SOFTMAX"]) < softmax["SOFTMAX_BACKWARD"]
    assert softmax["SOFTMAX_BACKWARD"] < softmax["LOG_SOFTMAX_BACKWARD"]
    gemm = ops["gemm_flags"]  # the FLAG_* bits lie below the activation field
    assert all(v < 1 << gemm["ACT_SHIFT"] for k, v in gemm.items() if k.startswith("FLAG_"))
    assert max(ops["act"].values()) < 1 << (32 - gemm["ACT_SHIFT"])


def test_trig_glsl_holds_the_bits_of_2_over_pi():
    """shaders/trig.glsl's Payne-Hanek table: a zero word, then 2/pi's fraction bits, checked
    against 2/pi computed with Python integers (Machin's formula for pi)."""
    import re

    def arctan_inv(x: int, bits: int) -> int:
        one = 1 << bits
        total = term = one // x
        n, sign = 1, -1
        while term:
            term //= x * x
            total += sign * (term // (2 * n + 1))
            sign, n = -sign, n + 1
        return total

    bits = 420
    pi = 4 * (4 * arctan_inv(5, bits) - arctan_inv(239, bits))
    two_over_pi = (2 << (2 * bits)) // pi
    text = (ROOT / "shaders" / "trig.glsl").read_text()
    table = re.search(r"TWO_OVER_PI\[\d+\] = uint\[\d+\]\(([^)]*)\)", text).group(1)
    words = [int(w.strip().rstrip("u"), 16) for w in table.split(",")]
    assert words[0] == 0
    want = [(two_over_pi >> (bits - 32 * (k + 1))) & 0xFFFFFFFF for k in range(len(words) - 1)]
    assert words[1:] == want
