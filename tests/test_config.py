"""Every GPUCORE_* environment variable is checked when gpucore is imported (gpucore/config.py):
a bad value raises ConfigError naming the variable and what it accepts; an unknown GPUCORE_*
name draws a warning with the closest known one; README.md documents exactly these variables."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpucore import config
from gpucore.config import VARIABLES, ConfigError, check_environment

ROOT = Path(__file__).resolve().parents[1]

GOOD = {
    "GPUCORE_DEVICE": ["auto", "cpu", "vulkan", "CPU"],
    "GPUCORE_GPU_THRESHOLD": ["0", "4096"],
    "GPUCORE_VULKAN_ALLOW_CPU": ["0", "1"],
    "GPUCORE_VULKAN_DEVICE": ["0", "3"],
    "GPUCORE_VULKAN_GEMM": ["auto", "tiled", "regblock"],
    "GPUCORE_VULKAN_QGEMM": ["auto", "dot", "plain"],
    "GPUCORE_VULKAN_TIMEOUT": ["120", "0.5"],
    "GPUCORE_VULKAN_FUSION": ["auto", "0", "1"],
    "GPUCORE_VULKAN_PUSH_DESCRIPTORS": ["0", "1"],
    "GPUCORE_VULKAN_RESIDENCY": ["0", "1"],
    "GPUCORE_VULKAN_PREWARM": ["0", "1"],
    "GPUCORE_VULKAN_PIPELINE_CACHE": ["0", "/tmp/gpucore-cache", "~/c"],
    "GPUCORE_CPU_ISA": ["avx2", "scalar"],
    "GPUCORE_NUM_THREADS": ["1", "16"],
    "GPUCORE_GEMM_BLOCKING": ["96,256,4096"],
    "GPUCORE_HOST_CACHE_MB": ["0", "1024"],
    "GPUCORE_PACK": ["0", "1"],
    "GPUCORE_CONV": [
        "auto",
        "im2col",
        "Direct ",
        "direct_t",
        "direct_gw",
        "winograd",
        "pointwise",
        "pointwise_t",
    ],
    "GPUCORE_CONV_WIDE": ["0", "1"],
    "GPUCORE_CONV_TILE_LOOP": ["0", "1"],
}
BAD = {
    "GPUCORE_DEVICE": ["gpu", "cuda"],
    "GPUCORE_GPU_THRESHOLD": ["-1", "big", "1e3"],
    "GPUCORE_VULKAN_ALLOW_CPU": ["yes", "2"],
    "GPUCORE_VULKAN_DEVICE": ["-1", "first"],
    "GPUCORE_VULKAN_GEMM": ["fast"],
    "GPUCORE_VULKAN_QGEMM": ["vnni"],
    "GPUCORE_VULKAN_TIMEOUT": ["inf", "nan", "0", "-3", "soon"],
    "GPUCORE_VULKAN_FUSION": ["maybe", "yes"],
    "GPUCORE_VULKAN_PUSH_DESCRIPTORS": ["off"],
    "GPUCORE_VULKAN_RESIDENCY": ["on", "2"],
    "GPUCORE_VULKAN_PREWARM": ["yes"],
    "GPUCORE_VULKAN_PIPELINE_CACHE": ["1", "cache/dir"],
    "GPUCORE_CPU_ISA": ["avx9"],
    "GPUCORE_NUM_THREADS": ["0", "two"],
    "GPUCORE_GEMM_BLOCKING": ["1,2", "0,1,2", "a,b,c"],
    "GPUCORE_HOST_CACHE_MB": ["-5", "lots"],
    "GPUCORE_PACK": ["2", "no"],
    "GPUCORE_CONV": ["fft", "1"],
    "GPUCORE_CONV_WIDE": ["yes", "32"],
    "GPUCORE_CONV_TILE_LOOP": ["on"],
}


def test_every_variable_has_good_and_bad_examples():
    assert set(GOOD) == set(VARIABLES) == set(BAD)


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_accepted_values_pass_and_unset_or_empty_means_default(name):
    for value in GOOD[name]:
        check_environment({name: value})
    check_environment({name: ""})
    check_environment({})


@pytest.mark.parametrize("name", sorted(VARIABLES))
def test_a_bad_value_names_the_variable_the_value_and_what_it_accepts(name):
    for value in BAD[name]:
        with pytest.raises(ConfigError) as e:
            check_environment({name: value})
        msg = str(e.value)
        assert name in msg and repr(value) in msg and VARIABLES[name].accepts in msg
        assert isinstance(e.value, ValueError)


def test_an_unknown_gpucore_variable_warns_with_the_closest_name():
    with pytest.warns(UserWarning, match="GPUCORE_DEVISE.*did you mean GPUCORE_DEVICE"):
        check_environment({"GPUCORE_DEVISE": "cpu"})
    for tool in config.TOOL_VARIABLES:  # the scripts' own variables are known
        check_environment({tool: "1"})


@pytest.mark.parametrize(
    "name,value",
    [
        ("GPUCORE_VULKAN_FUSION", "maybe"),
        ("GPUCORE_VULKAN_TIMEOUT", "inf"),
        ("GPUCORE_NUM_THREADS", "0"),
    ],
)
def test_import_refuses_a_bad_value_before_anything_runs(name, value):
    env = {"PATH": "/usr/bin:/bin", name: value}
    res = subprocess.run(
        [sys.executable, "-c", "import gpucore"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode != 0
    assert "ConfigError" in res.stderr and f"{name}={value!r}" in res.stderr


def test_the_readme_documents_exactly_the_library_variables():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Configuration") :]
    documented = set(re.findall(r"^\| `(GPUCORE_[A-Z0-9_]+)", section, re.M))
    assert set(VARIABLES) <= documented
    assert documented - set(VARIABLES) <= config.TOOL_VARIABLES


def test_every_conv_path_the_c_code_and_readme_name_is_accepted_at_import():
    """The GPUCORE_CONV words cpu/conv*.c match and README's row lists, in a fresh process."""
    c_words = set()
    for path in (ROOT / "cpu").glob("conv*.c"):
        c_words |= set(re.findall(r'gc_env_is\(e, "([a-z0-9_]+)"\)', path.read_text()))
    c_words.discard("0")  # dconv_env_on's GPUCORE_CONV_WIDE / _TILE_LOOP switches
    row = next(
        line
        for line in (ROOT / "README.md").read_text().splitlines()
        if line.startswith("| `GPUCORE_CONV=")
    )
    readme_words = set(re.findall(r"`(?:GPUCORE_CONV=)?([a-z0-9_]+)`", row.split(" | ")[0]))
    assert {"direct_t", "pointwise_t", "winograd"} <= c_words
    assert c_words <= readme_words | {"auto"}, c_words - readme_words
    for value in sorted(c_words | readme_words):
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "GPUCORE_CONV": value}
        res = subprocess.run(
            [sys.executable, "-c", "import gpucore"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            cwd=ROOT,
        )
        assert res.returncode == 0, (value, res.stderr[-400:])
