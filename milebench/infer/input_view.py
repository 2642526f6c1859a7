"""What one sample looks like to a model, as its adapter builds it: the data ``render-input`` prints.

Adapters that can show their input without loading weights (constructed with ``with_model=False``)
implement :class:`ShowsInput`; the view is built by the same code that feeds the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from milebench.infer.image_preprocessing import ImageStep
from milebench.infer.records import ModelInput
from milebench.spec.execution import Execution

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class InputView:
    text: str
    """The exact text the model's tokenizer receives: turn format, image tokens in place."""
    tokens: int
    """Input length as measured against the model's window, every image at its full size."""
    ids_per_image: int | None
    """Input ids each image token stands for in the encoded ids, where the adapter knows it."""
    steps: tuple[ImageStep, ...]
    """Per picture, in input order: what preprocessing did before the image processor."""
    pixels: tuple[int, ...] | None
    """Shape of the pixel tensor the model gets; None where the model's own code reads the pictures."""
    notes: tuple[str, ...] = ()
    """What else decides the input that the text does not show (the model's own cuts, image reading)."""


@runtime_checkable
class ShowsInput(Protocol):
    """An adapter class that can show its input (methods only, so ``issubclass`` can tell)."""

    def input_view(self, sample: ModelInput) -> InputView:
        """The sample as this adapter feeds it to the model."""
        ...


class InputAdapter(ShowsInput, Protocol):
    """What ``render-input`` reads of an adapter it built without weights."""

    execution: Execution
    device: torch.device
