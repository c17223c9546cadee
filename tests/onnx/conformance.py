"""ONNX's conformance cases for gpucore.onnx.backend: the node cases the onnx wheel generates in
memory (``onnx.backend.test.case.node``: a one-op model, inputs, expected outputs) and the model
directories it ships (``onnx/backend/test/data/<kind>/<test>/model.onnx`` + ``test_data_set_*``;
``real``: the light models with constant weights, fed ONNX's dummy inputs), run as ONNX's own
harness (``onnx.backend.test.runner.Runner``) runs them, compared as it compares (shapes and
dtypes equal, ``assert_allclose`` with the case's rtol / atol: 1e-3 / 1e-7 by default, exact
for integers and bools).

An exclusion list maps keys to (category, reason); ``excluded(case, table)`` finds the entry
that covers a case. A key is a case name (``test_mod_int64_fmod``, ``simple/test_sign_model``),
a glob of case names (``test_argmax_*_select_last_index``), an op type the case's graph uses
(``Attention``), ``dtype:<ONNX type>`` (an input, output, initializer or Cast target of that
type), ``type:<sequence|optional|map>`` (a graph input or output that is not a tensor) or
``domain:<name>`` (a node of that domain).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import os
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.runner import Runner

SEED = 0  # the node cases draw random inputs from numpy's global generator

# exclusion categories, with the reason an entry whose own reason is "" gives
TYPES = "sequence/optional types"
STRINGS = "string tensors"
DTYPE = "dtype"
DOMAIN = "domain"
TRAINING = "training only"
CONTROL = "control flow"
RANDOM = "random"
DYNAMIC = "data-dependent shape"
OP = "no handler"
FEATURE = "unsupported feature"
LOAD_TIME = "value needed at load time"
PRECISION = "precision"
NO_SHADER = "no Vulkan shader"
DEVICE_LIMIT = "device limit"
CATEGORIES = {
    TYPES: "sequence / optional values: gpucore runs tensors only",
    STRINGS: "string tensors: gpucore has no string dtype",
    DTYPE: "an element type gpucore has no dtype for",
    DOMAIN: "an operator domain other than the default ONNX one",
    TRAINING: "a training-only operator or mode",
    CONTROL: "control flow with subgraphs (If / Loop / Scan) is not imported",
    RANDOM: "random sampling: the outputs cannot equal the reference's",
    DYNAMIC: "the output's shape depends on input values; gpucore compiles shapes",
    OP: "the importer has no handler for this op yet",
    FEATURE: "an attribute, rank or output of a supported op",
    LOAD_TIME: "a shape operand computed from input values, which gpucore needs at load time",
    PRECISION: "the result is close, but outside the case's tolerance",
    NO_SHADER: "the runtime has no Vulkan shader for an op of the lowered graph (DeviceError)",
    DEVICE_LIMIT: "a tensor larger than the device's largest storage binding (lavapipe: 128 MiB) "
    "in an op without a chunked variant (DeviceError)",
}


@dataclasses.dataclass
class Case:
    """One conformance case: a model and its (inputs, expected outputs) data sets."""

    name: str
    model: onnx.ModelProto
    data_sets: list  # [(inputs, outputs)]: arrays or TensorProto / SequenceProto values
    rtol: float = 1e-3
    atol: float = 1e-7

    def features(self) -> list:
        """The exclusion keys that describe this case (see the module docstring)."""
        return features(self.model)


def _types(vi, out: list) -> None:
    t = vi.type
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        out.append("dtype:" + onnx.TensorProto.DataType.Name(t.tensor_type.elem_type))
    elif kind is not None:
        out.append("type:" + kind.removesuffix("_type"))


def features(model: onnx.ModelProto) -> list:
    """dtype / type / domain / op-type keys of a model (nodes of subgraphs included)."""
    g = model.graph
    keys: list = []
    for vi in list(g.input) + list(g.output):
        _types(vi, keys)
    keys += ["dtype:" + onnx.TensorProto.DataType.Name(t.data_type) for t in g.initializer]
    stack = list(g.node)
    while stack:
        node = stack.pop()
        keys.append(node.op_type)
        if node.domain not in ("", "ai.onnx"):
            keys.append("domain:" + node.domain)
        for a in node.attribute:
            if node.op_type in ("Cast", "CastLike") and a.name == "to":
                keys.append("dtype:" + onnx.TensorProto.DataType.Name(a.i))
            if a.type == onnx.AttributeProto.GRAPH:
                stack += list(a.g.node)
            stack += [n for sub in a.graphs for n in sub.node]
    return list(dict.fromkeys(keys))


def excluded(case: Case, table: dict):
    """(key, category, reason) of the entry of ``table`` that covers ``case``, or None (an
    entry's reason "" is its category's)."""
    globs = [k for k in table if "*" in k and fnmatch.fnmatchcase(case.name, k)]
    for key in [case.name, *globs, *case.features()]:
        if key in table:
            category, reason = table[key]
            return key, category, reason or CATEGORIES[category]
    return None


def node_cases() -> list:
    """Every node case the installed onnx generates (1,884 in onnx 1.23), inputs seeded."""
    from onnx.backend.test.loader import load_node_model_tests

    state = np.random.get_state()
    np.random.seed(SEED)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            tests = load_node_model_tests()
    finally:
        np.random.set_state(state)
    return [Case(t.name, t.model, list(t.data_sets), t.rtol, t.atol) for t in tests]


DATA_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
MODEL_KINDS = ("simple", "pytorch-converted", "pytorch-operator", "real")


def _read(path: str, type_proto):
    with open(path, "rb") as f:
        data = f.read()
    if type_proto.HasField("sequence_type"):
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return numpy_helper.to_list(seq)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _dummy(vi) -> np.ndarray:
    """ONNX's Runner.generate_dummy_data(random=False): arange / n, float32."""
    shape = tuple(
        d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
    )
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def model_dir_cases() -> list:
    """The model directories the onnx wheel ships, named ``<kind>/<test>``; ``real`` ones are
    the light models of ``data/light`` on ONNX's dummy inputs with their stored outputs."""
    cases = []
    for kind in MODEL_KINDS:
        for t in sorted(os.listdir(os.path.join(DATA_DIR, kind))):
            case_dir = os.path.join(DATA_DIR, kind, t)
            if not os.path.isdir(case_dir):
                continue
            name = f"{kind}/{t}"
            if kind == "real":
                model_name = t.removeprefix("test_")
                path = os.path.join(DATA_DIR, "light", f"light_{model_name}.onnx")
                model = onnx.load(path)
                inits = {i.name for i in model.graph.initializer}
                ins = [_dummy(v) for v in model.graph.input if v.name not in inits]
                outs = [
                    _read(f"{path[:-5]}_output_{i}.pb", o.type)
                    for i, o in enumerate(model.graph.output)
                ]
                cases.append(Case(name, model, [(ins, outs)]))
                continue
            model = onnx.load(os.path.join(case_dir, "model.onnx"))
            data_sets = []
            for d in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
                n_in = len(glob.glob(os.path.join(d, "input_*.pb")))
                n_out = len(glob.glob(os.path.join(d, "output_*.pb")))
                ins = [_read(f"{d}/input_{i}.pb", model.graph.input[i].type) for i in range(n_in)]
                outs = [
                    _read(f"{d}/output_{i}.pb", model.graph.output[i].type) for i in range(n_out)
                ]
                data_sets.append((ins, outs))
            cases.append(Case(name, model, data_sets))
    return cases


_CASES: list = []


def all_cases() -> list:
    """The node cases and the model-directory cases (generated once per process)."""
    if not _CASES:
        _CASES.extend(node_cases() + model_dir_cases())
    return _CASES


def summary(backend, table: dict, device: str = "CPU", cases=None) -> dict:
    """Run ``cases`` (default: all) on ``device``: {"total", "passed", "failed": [names],
    "excluded": {category: count}, "passing_excluded": [names]}."""
    out = {"total": 0, "passed": 0, "failed": [], "excluded": {}, "passing_excluded": []}
    for case in all_cases() if cases is None else cases:
        out["total"] += 1
        hit = excluded(case, table)
        try:
            run_case(backend, case, device)
            ok = True
        except Exception:  # noqa: BLE001 - any failure counts as one
            ok = False
        if hit is not None:
            out["excluded"][hit[1]] = out["excluded"].get(hit[1], 0) + 1
            if ok:
                out["passing_excluded"].append(case.name)
        elif ok:
            out["passed"] += 1
        else:
            out["failed"].append(case.name)
    return out


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v


def run_case(backend, case: Case, device: str = "CPU") -> None:
    """Prepare the case's model on ``device`` and check every data set as ONNX's harness does
    (AssertionError on a wrong result; the backend's own error when it cannot run it)."""
    rep = backend.prepare(case.model, device)
    for inputs, outputs in case.data_sets:
        got = rep.run([_array(v) for v in inputs])
        Runner.assert_similar_outputs(
            [_array(v) for v in outputs], list(got), rtol=case.rtol, atol=case.atol
        )
