"""Model inputs built one batch ahead by a worker process, while the model generates the current batch.

Image decoding and the model's processor are CPU work that would otherwise stall the model between
batches (on a GPU box, the GPU idles while a 100-image sample is decoded and resized). torch's
``DataLoader`` does the process management: workers forked from the job (no model is pickled), batches
in order, a bounded number ready ahead. A batch whose inputs cannot be built arrives as an
``InputFailure`` so the engine records its samples as failed and goes on.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from milebench.infer.adapter import failure_kind
from milebench.records import FailureKind, PreparedSample

log = logging.getLogger(__name__)

FORK = "fork"
"""Workers are forked, so they share the loaded processor without pickling the adapter and its model."""
PREFETCH_BATCHES = 2
"""Batches each worker keeps ready: one to hand over, one in the making."""
MIN_WORKER_BATCHES = 8
"""Fewer batches are built in line: a worker costs a fork and a first batch before it saves anything
(about 40 ms on a CPU box, some 8 batches of the tiny model's input building)."""


class InputFailure(NamedTuple):
    """Why a batch's inputs could not be built; picklable, unlike some exceptions."""

    kind: FailureKind
    detail: str


class PickledEncode:
    """The worker's side: ``encode``, pickled by value, its failure returned instead of raised so one bad
    image never stops the loader. Handing tensors over as bytes costs a fraction of a millisecond;
    torch's shared-memory handover costs milliseconds per tensor, which a fast model feels."""

    def __init__(self, encode: Callable[[Sequence[PreparedSample]], Any]) -> None:
        self.encode = encode

    def __call__(self, batch: Sequence[PreparedSample]) -> bytes:
        try:
            inputs = self.encode(batch)
        except Exception as err:
            inputs = InputFailure(failure_kind(err), f"{type(err).__name__}: {err}")
        return pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL)


def worth_a_worker(workers: int, batches: int) -> bool:
    """Whether a worker process pays for itself: it needs fork, and enough batches to repay its start."""
    if workers == 0 or batches < MIN_WORKER_BATCHES:
        return False
    if FORK not in multiprocessing.get_all_start_methods():
        log.info("no fork on this platform: inputs are built in line")
        return False
    return True


def prefetched(
    batches: Sequence[Sequence[PreparedSample]],
    encode: Callable[[Sequence[PreparedSample]], Any],
    workers: int,
) -> Iterator[tuple[Sequence[PreparedSample], Any]]:
    """``(batch, inputs or InputFailure)`` in batch order, built by ``workers`` forked processes."""
    from torch.utils.data import DataLoader

    loader = DataLoader(
        batches,  # type: ignore[arg-type]
        batch_size=None,
        collate_fn=PickledEncode(encode),
        num_workers=workers,
        prefetch_factor=PREFETCH_BATCHES,
        multiprocessing_context=multiprocessing.get_context(FORK),
    )
    for batch, payload in zip(batches, loader, strict=True):
        yield batch, pickle.loads(payload)
