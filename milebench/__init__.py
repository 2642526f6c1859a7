"""MileBench reproducibility kit: fetch, preprocess, infer, score and report MileBench runs."""

__version__ = "0.1.0"
