"""tests/runtime set-up: puts this folder on sys.path so that the test files can ``import
runtime_models`` (the models and helpers they share), as tests/nn/conftest.py does."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
