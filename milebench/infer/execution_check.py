"""Each adapter carries out only some execution choices; a spec asking for another is refused at load,
before any weights are read, so a run never reports choices it did not make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from milebench.infer.adapter import AdapterError
from milebench.spec.execution import Execution
from milebench.spec.model import ModelSpec


class UnsupportedExecution(AdapterError):
    """A model spec's execution (or the run's variant of it) asks for a choice its adapter cannot make."""


def require_supported(spec: ModelSpec, execution: Execution, supported: Mapping[str, frozenset[Any]]) -> None:
    """Raise :class:`UnsupportedExecution` naming every field whose choice is not in ``supported``
    (field -> the values the adapter carries out; fields not named take any value)."""
    wrong = [
        f"{field}: {shown(getattr(execution, field))} (supported: {', '.join(sorted(map(shown, allowed)))})"
        for field, allowed in supported.items()
        if getattr(execution, field) not in allowed
    ]
    if wrong:
        raise UnsupportedExecution(
            f"model spec {spec.name!r}, execution {execution.label}: adapter {spec.adapter} "
            f"cannot run {'; '.join(wrong)}"
        )


def shown(value: Any) -> str:
    """A choice as a spec file writes it: enum values by name, stop strings as a list."""
    if isinstance(value, tuple):
        return repr(list(value))
    return str(value).lower() if isinstance(value, bool) else str(value)
