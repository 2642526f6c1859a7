"""Inference: the engine that runs a model spec over model inputs, resumably, and the model adapters."""
