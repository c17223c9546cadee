"""Build script for the C extension gpucore._cpu (metadata lives in pyproject.toml)."""

import glob

from setuptools import Extension, setup

sources = sorted(glob.glob("cpu/*.c"))

setup(
    ext_modules=[
        Extension(
            "gpucore._cpu",
            sources=sources,
            include_dirs=["cpu"],
            extra_compile_args=["-std=c11", "-O3", "-fno-math-errno", "-Wall", "-Wno-unused-function"],
            libraries=["m"],
        )
    ]
)
