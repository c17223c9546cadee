"""tests/backends/cpu/kernels set-up: puts this folder on sys.path so that the test files can
``import cpu_ext`` (the extension under test and the helpers they share), as tests/conftest.py
does for tests/helpers.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
