"""The public API is declared in one place (gpucore/ops/api.py): every gpucore function an op
module provides and every Tensor member it attaches goes through ``public``/``tensor_member``."""

import ast
import importlib
import inspect

import pytest

import gpucore
from gpucore.ops import api
from gpucore.tensor import Tensor

# gpucore.tensor is the creation function; the module is reached by its full name
tensor_module = importlib.import_module("gpucore.tensor")


def _class_body_names(cls) -> set:
    tree = ast.parse(inspect.getsource(tensor_module))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            return names
    raise AssertionError(f"class {cls.__name__} not found in tensor.py")


def test_every_tensor_member_is_defined_in_the_class_or_declared_in_api():
    own = _class_body_names(Tensor) | {
        "__dict__",
        "__weakref__",
        "__module__",
        "__doc__",
        "__slots__",
        "__annotations__",
        "__firstlineno__",
        "__static_attributes__",
        "__qualname__",
    }
    own |= set(getattr(Tensor, "__slots__", ()))
    stray = sorted(n for n in vars(Tensor) if n not in own and n not in api.METHODS)
    assert not stray, f"Tensor members attached outside api.tensor_member/public: {stray}"


def test_declared_members_are_the_ones_on_tensor():
    for name, value in api.METHODS.items():
        assert vars(Tensor)[name] is value, name


def test_every_declared_function_is_exported_by_gpucore():
    for name, fn in api.FUNCTIONS.items():
        assert getattr(gpucore, name) is fn, name


def test_inplace_forms_exist_for_every_declaration():
    for name, (base, _) in api.INPLACE.items():
        assert name == base + "_"
        assert callable(getattr(Tensor, name)), name


def test_a_name_cannot_be_declared_twice():
    with pytest.raises(ValueError, match="declared twice"):
        api.public("exp")(lambda x: x)
    with pytest.raises(ValueError, match="declared twice"):
        api.tensor_member("shape", property(lambda self: None))


def test_inplace_form_updates_the_tensor_and_returns_it():
    x = gpucore.tensor([0.5, 1.0, 4.0])
    y = x.sqrt_()
    assert y is x
    assert x.tolist() == pytest.approx([0.5**0.5, 1.0, 2.0], rel=1e-6)


def test_variants_give_function_method_and_inplace_form():
    from gpucore.ops.registry import REGISTRY

    op = REGISTRY["exp"]
    assert op.function is gpucore.exp is api.FUNCTIONS["exp"]
    assert Tensor.exp is op.function
    assert "exp_" in api.INPLACE
