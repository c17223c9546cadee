"""tests/distributed set-up: puts this folder on sys.path so the test files can
``import mpi_harness`` (tests have no __init__.py)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
