"""Runnable examples.

- ``python -m gpucore.examples.digits``: the main demo, a CNN (or MLP) on scikit-learn's 8x8 digits
  (needs the ``examples`` extra: scikit-learn; tqdm and matplotlib are optional).
- ``python -m gpucore.examples.demo``: a tiny MLP on synthetic data with plain tensors and no
  dependency beyond gpucore.
"""
