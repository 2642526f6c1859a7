"""Model inputs built one batch ahead by a worker process, while the model generates the current batch.

Image decoding and the model's processor are CPU work that would otherwise stall the model between
batches (on a GPU box, the GPU idles while a 100-image sample is decoded and resized). torch's
``DataLoader`` does the process management: workers forked from the job (no model is pickled), batches
in order, a bounded number ready ahead. A batch whose inputs cannot be built arrives as an
``InputFailure`` so the engine records its samples as failed and goes on; when one sample's image is
to blame, only that sample fails and the rest of its batch is answered.

A worker dies with the job however the job dies: on a SIGKILL the DataLoader cannot stop it, and a
worker caught handing over a batch larger than the pipe's buffer would otherwise wait forever, holding
its memory. Linux kills it at once (``PR_SET_PDEATHSIG``); elsewhere a thread in the worker sees its
parent change within ``PARENT_POLL_S``.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from milebench.infer.adapter import ImageError, failure_kind
from milebench.infer.records import FailureKind, ModelInput

log = logging.getLogger(__name__)

FORK = "fork"
"""Workers are forked, so they share the loaded processor without pickling the adapter and its model."""
PREFETCH_BATCHES = 2
"""Batches each worker keeps ready: one to hand over, one in the making."""
MIN_WORKER_BATCHES = 8
"""Fewer batches are built in line: a worker costs a fork and a first batch before it saves anything
(about 40 ms on a CPU box, some 8 batches of the tiny model's input building)."""
PR_SET_PDEATHSIG = 1
"""From ``<linux/prctl.h>``: the signal a process gets when the thread that forked it exits."""
PARENT_POLL_S = 0.5
"""How often a worker checks that its parent still lives, where the kernel cannot tell it."""


class InputFailure(NamedTuple):
    """Why a batch's inputs could not be built; picklable, unlike some exceptions."""

    kind: FailureKind
    detail: str
    sample_id: int | None = None
    """The one sample to blame (its image), when known: the rest of the batch can still be answered."""


def input_failure(err: Exception) -> InputFailure:
    """The failure of building a batch's inputs, in line or in a worker."""
    sample_id = err.sample_id if isinstance(err, ImageError) else None
    return InputFailure(failure_kind(err), f"{type(err).__name__}: {err}", sample_id)


def die_with_parent(parent: int, _worker_id: int) -> None:
    """The workers' ``worker_init_fn``: end this process as soon as ``parent`` (the job) is gone."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            log.warning("input worker: prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
    threading.Thread(target=watch_parent, args=(parent,), name="watch-parent", daemon=True).start()


def watch_parent(parent: int) -> None:
    """Exit at once, skipping every cleanup that could wait on the dead parent, when it is gone; also
    covers a parent that died before ``prctl`` took effect."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


class PickledEncode:
    """The worker's side: ``encode``, pickled by value, its failure returned instead of raised so one bad
    image never stops the loader. Handing tensors over as bytes costs a fraction of a millisecond;
    torch's shared-memory handover costs milliseconds per tensor, which a fast model feels."""

    def __init__(self, encode: Callable[[Sequence[ModelInput]], Any]) -> None:
        self.encode = encode

    def __call__(self, batch: Sequence[ModelInput]) -> bytes:
        try:
            inputs = self.encode(batch)
        except Exception as err:
            inputs = input_failure(err)
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
    batches: Sequence[Sequence[ModelInput]],
    encode: Callable[[Sequence[ModelInput]], Any],
    workers: int,
) -> Iterator[tuple[Sequence[ModelInput], Any]]:
    """``(batch, inputs or InputFailure)`` in batch order, built by ``workers`` forked processes."""
    from torch.utils.data import DataLoader

    loader: DataLoader[bytes] = DataLoader(
        batches,  # type: ignore[arg-type]
        batch_size=None,
        collate_fn=PickledEncode(encode),
        num_workers=workers,
        prefetch_factor=PREFETCH_BATCHES,
        multiprocessing_context=multiprocessing.get_context(FORK),
        worker_init_fn=functools.partial(die_with_parent, os.getpid()),
    )
    for batch, payload in zip(batches, loader, strict=True):
        yield batch, pickle.loads(payload)
