"""tests/distributions set-up: puts this folder on sys.path so that the test files can
``import dist_cases`` (the table of distributions they share)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
