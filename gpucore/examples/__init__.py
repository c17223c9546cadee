"""Runnable examples: ``python -m gpucore.examples.demo``."""
