"""A job's CPU allotment: how many threads the model's libraries take, and whether a worker process
builds the next batch's inputs."""

from __future__ import annotations

import os
import sys

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def limit_threads(threads: int | None) -> None:
    """Keep the model's libraries to the job's CPU allotment: without it torch starts one thread per
    core in every job, and parallel jobs (or a cluster's one-CPU slot) oversubscribe the cores."""
    if threads is None:
        return
    for name in THREAD_VARIABLES:
        os.environ[name] = str(threads)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)


def split_threads(threads: int | None) -> tuple[int | None, int]:
    """The job's threads as (model threads, input workers): with two or more, one goes to a worker
    process that builds the next batch's inputs while the model generates; with one, or none given,
    inputs are built in line."""
    if threads is None or threads < 2:
        return threads, 0
    return threads - 1, 1
