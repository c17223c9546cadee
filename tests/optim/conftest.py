"""tests/optim set-up: puts this folder on sys.path so that the topic files can ``import
optim_harness`` (the runners and float64 references they share), as tests/conftest.py does for
tests/optim_ref.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
