"""Score stage: per-sample judgments as the official evaluator makes them, and aggregation."""
