"""The runtime's IR: the graph (graph.py), symbolic sizes (symbolic.py) and the op table
(ops.py, with the registry ops' lowerings in lowering.py, the fused ops in fused.py and the
quantized ops in quantized.py and dynamic_quant.py)."""

from . import dynamic_quant, fused, lowering, quantized  # noqa: F401 - they fill the op table
from .graph import Graph, GraphError, Node, TensorInfo
from .ops import OPS, RuntimeOp, defruntime, op_info
