"""The public API is declared in one place (gpucore/ops/api.py): every gpucore function an op
module provides and every Tensor member it attaches goes through ``public``/``tensor_member``."""

import ast
import importlib
import inspect

import numpy as np
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


# Issue 20, item 12: non-Tensor arguments get PyTorch's TypeError naming the function and the
# argument, from one mechanism: the public forms check the parameters annotated ``Tensor``,
# registry.apply checks op inputs, the operand normalisation checks numbers.
@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: gpucore.exp(3.0),
            "exp(): argument 'input' (position 1) must be Tensor, not float",
        ),
        (
            lambda: gpucore.exp(None),
            "exp(): argument 'input' (position 1) must be Tensor, not NoneType",
        ),
        (
            lambda: gpucore.isnan(None),
            "isnan(): argument 'input' (position 1) must be Tensor, not NoneType",
        ),
        (
            lambda: gpucore.isnan("abc"),
            "isnan(): argument 'input' (position 1) must be Tensor, not str",
        ),
        (
            lambda: gpucore.exp(np.ones(3, np.float32)),
            "exp(): argument 'input' (position 1) must be Tensor, not numpy.ndarray",
        ),
        (
            lambda: gpucore.logical_and(gpucore.ones(2), "s"),
            "logical_and(): argument 'other' (position 2)",
        ),
        (lambda: gpucore.add(gpucore.ones(2), None), "add(): argument 'other' (position 2)"),
        (lambda: gpucore.ones(3).gather(0, None), "gather(): argument 'index' (position 2)"),
        (
            lambda: gpucore.gather(gpucore.ones(3), 0, index="i"),
            "'index' (position 3) must be Tensor, not str",
        ),
        (lambda: gpucore.broadcast_tensors(gpucore.ones(2), 3), "broadcast_tensors(): argument"),
        (lambda: gpucore.cat([gpucore.ones(2), None]), "cat(): expected a Tensor as element 1"),
        (lambda: gpucore.stack(gpucore.ones(2)), "stack(): argument 'tensors' (position 1)"),
        (lambda: gpucore.nn.functional.relu("x"), "relu(): argument 'input' (position 1)"),
        (lambda: gpucore.ones(2) @ None, "matmul(): argument 'other' (position 2)"),
    ],
)
def test_non_tensor_arguments_raise_type_errors_naming_function_and_argument(call, message):
    with pytest.raises(gpucore.ArgumentTypeError) as e:
        call()
    assert message in str(e.value)
    assert isinstance(e.value, TypeError) and isinstance(e.value, gpucore.GpucoreError)


def test_numbers_still_convert_where_pytorch_converts():
    t = gpucore.tensor([1.0, 2.0])
    assert gpucore.add(2.0, t).tolist() == [3.0, 4.0]
    assert gpucore.logical_and(t, 0).tolist() == [False, False]
    assert gpucore.where(t > 1, t, 0.0).tolist() == [0.0, 2.0]


def test_a_composition_names_the_public_function_in_inner_errors():
    with pytest.raises(gpucore.ShapeError, match=r"^addmm\(\): add: shapes"):
        gpucore.addmm(gpucore.ones(3, 5), gpucore.ones(3, 4), gpucore.ones(4, 2))
    with pytest.raises(IndexError, match=r"^norm\(\): sum: dim 7"):
        gpucore.norm(gpucore.ones(3, 4), dim=7)


def test_checked_forms_keep_the_signature_and_identity_rules():
    assert list(inspect.signature(gpucore.gather).parameters) == ["input", "dim", "index"]
    assert gpucore.gather.__doc__ and gpucore.gather.__name__ == "gather"
    # unary ops hand their input to apply, which checks it: no wrapper around the fast lane
    assert gpucore.exp is Tensor.exp
