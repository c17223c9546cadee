"""tests/onnx set-up: puts this folder on sys.path so that the test files (here and in ops/) can
``import onnx_cases``, the model builders and references they share."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
