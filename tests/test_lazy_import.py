"""``import gpucore`` leaves the subpackages the core does not need (gpucore/__init__.py's
``_LAZY``) unimported; they load on first access, as the same module objects ``import gpucore.X``
gives, and the op registry is complete without them.

Each check runs in a fresh interpreter: the test process has imported everything already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import gpucore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAZY = gpucore._LAZY + ("quantization",)


def fresh(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter importing this checkout's gpucore."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUCORE_")}
    base["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env},
        cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def last_json(res: subprocess.CompletedProcess):
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_import_gpucore_leaves_the_lazy_subpackages_and_onnx_unimported():
    got = last_json(
        fresh(
            "import sys, json, gpucore\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'onnx'\n"
            "    or m.startswith('gpucore.nn.modules')\n"
            "    or m.startswith('gpucore.') and m.split('.')[1] in gpucore._LAZY + "
            "('quantization',))))"
        )
    )
    assert got == []


@pytest.mark.parametrize("name", LAZY)
def test_a_lazy_attribute_is_the_module_import_gives(name):
    got = last_json(
        fresh(
            "import importlib, json, sys, gpucore\n"
            f"listed = {name!r} in dir(gpucore)\n"  # before the import binds it
            f"m = gpucore.{name}\n"
            f"same = m is importlib.import_module('gpucore.{name}')\n"
            f"same = same and m is sys.modules['gpucore.{name}']\n"
            "print(json.dumps([same, m.__name__, listed]))"
        )
    )
    assert got == [True, f"gpucore.{name}", name not in gpucore._UNLISTED]


def test_getmembers_leaves_distributed_unimported_and_the_environment_alone():
    # dir() leaves gpucore.distributed out: importing it sets OMPI_MCA_* (and reads RANK ...)
    got = last_json(
        fresh(
            "import inspect, json, os, sys, gpucore\n"
            "env = dict(os.environ)\n"
            "inspect.getmembers(gpucore)\n"
            "print(json.dumps(['gpucore.distributed' in sys.modules, dict(os.environ) == env]))"
        )
    )
    assert got == [False, True]


@pytest.mark.parametrize("name", ["optim", "utils", "io", "onnx"])
def test_import_statement_first_then_the_attribute(name):
    got = last_json(
        fresh(
            f"import json, gpucore.{name} as a\nimport gpucore\n"
            f"from gpucore import {name} as b\n"
            f"print(json.dumps([a is gpucore.{name} is b]))"
        )
    )
    assert got == [True]


def test_names_taken_from_lazy_modules_are_theirs():
    got = last_json(
        fresh(
            "import json, gpucore\nfrom gpucore import load, save\n"
            "import gpucore.io as io, gpucore.serialization as s\n"
            "print(json.dumps([load is io.load is s.load, save is io.save is gpucore.save,\n"
            "    'load' in dir(gpucore), gpucore.optim.SGD.__name__]))"
        )
    )
    assert got == [True, True, True, "SGD"]


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        gpucore.no_such_thing  # noqa: B018
    got = last_json(
        fresh(
            "import json, gpucore\ntry:\n    from gpucore import no_such_thing\n"
            "except ImportError as e:\n    print(json.dumps([type(e).__name__]))"
        )
    )
    assert got == ["ImportError"]


def test_the_registry_is_complete_before_any_lazy_subpackage_loads():
    """Whatever looks ops up by name (capture, the ONNX importer, serialization) finds every op
    right after ``import gpucore``: loading the lazy subpackages adds no op, no public function
    and no Tensor member."""
    got = last_json(
        fresh(
            "import importlib, json, gpucore\n"
            "from gpucore.ops import FUNCTIONS, METHODS, REGISTRY\n"
            "before = [sorted(REGISTRY), sorted(FUNCTIONS), sorted(METHODS)]\n"
            "for name in gpucore._LAZY + ('quantization',):\n"
            "    importlib.import_module('gpucore.' + name)\n"
            "for sub in ('gpucore.onnx.ops', 'gpucore.onnx.importer', 'gpucore.runtime.lazy'):\n"
            "    importlib.import_module(sub)\n"
            "after = [sorted(REGISTRY), sorted(FUNCTIONS), sorted(METHODS)]\n"
            "print(json.dumps([before == after, len(before[0])]))"
        )
    )
    assert got[0] is True and got[1] > 150


def test_an_unknown_gpucore_variable_still_warns_at_import():
    res = fresh("import gpucore", GPUCORE_DEVISE="cpu")
    assert "GPUCORE_DEVISE" in res.stderr and "did you mean GPUCORE_DEVICE" in res.stderr


def test_importing_the_runtime_leaves_io_unimported():
    got = last_json(
        fresh("import sys, json, gpucore.runtime\nprint(json.dumps('gpucore.io' in sys.modules))")
    )
    assert got is False


def test_the_layers_load_on_first_access_from_gpucore_nn():
    got = last_json(
        fresh(
            "import json, sys, gpucore\nfrom gpucore import nn\n"
            "before = 'gpucore.nn.modules' in sys.modules\n"
            "from gpucore.nn import Linear\nimport gpucore.nn.modules as layers\n"
            "ns = {}\nexec('from gpucore.nn import *', ns)\n"
            "print(json.dumps([before, Linear is nn.Linear is layers.Linear is ns['Linear'],\n"
            "    nn.modules is layers, set(layers.__all__) <= set(nn.__all__),\n"
            "    'Conv2d' in dir(nn), 'Module' in ns, hasattr(nn, 'NoSuchLayer')]))"
        )
    )
    assert got == [False, True, True, True, True, True, False]


def test_star_import_still_brings_what_was_imported_eagerly():
    got = last_json(
        fresh(
            "import json\nns = {}\nexec('from gpucore import *', ns)\nimport gpucore\n"
            "print(json.dumps([n in ns for n in ('Tensor', 'exp', 'conv2d', 'nn', 'optim',\n"
            "    'load', 'save', 'utils', 'io', 'special', 'runtime', 'onnx')]\n"
            "    + [ns['optim'] is gpucore.optim, ns['load'] is gpucore.io.load]))"
        )
    )
    assert got == [True] * 10 + [False, False] + [True, True]
