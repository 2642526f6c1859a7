"""Determinism and drift audit: what batching, repetition, another environment or another backend
change in a model's answers and scores (``milebench audit``)."""
