"""tests/nn set-up: puts this folder on sys.path so that the topic files can ``import nn_cases``
(the module table and references they share), as tests/conftest.py does for tests/helpers.py."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
