"""Inference stage: run a model spec over prepared samples, resumably."""
