"""Preprocess stage: turn upstream samples into model-neutral prompts."""
