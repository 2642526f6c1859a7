"""What the API models of a run need before any job starts: each one's key in the environment, unless its
spec marks the endpoint keyless. Checked once when a run starts (the workflow's ``onstart``), so a
missing key is said on the console, not in one job's log after fetch and preprocess ran."""

from __future__ import annotations

from collections.abc import Iterable

from milebench.infer.adapter import AdapterError
from milebench.infer.api.base import ApiAdapter, api_key
from milebench.infer.registry import kind_class
from milebench.spec.model import ApiModel, ModelSpec


def missing_prerequisites(models: Iterable[ModelSpec]) -> list[str]:
    """One line per API model that cannot start, saying what to set."""
    problems = []
    for spec in models:
        if not isinstance(spec.weights, ApiModel):
            continue
        adapter = kind_class(spec)
        if not issubclass(adapter, ApiAdapter):
            continue
        try:
            api_key(spec, adapter.key_env)
        except AdapterError as err:
            problems.append(str(err))
    return problems
