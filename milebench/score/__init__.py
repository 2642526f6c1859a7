"""Scoring: the registry of the scorers every judgment names, read from entry points."""
