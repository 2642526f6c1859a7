"""Job progress: a tqdm bar (rate, ETA) on a terminal, plain log lines with rate and ETA otherwise."""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType

from tqdm import tqdm

log = logging.getLogger(__name__)

LOG_EVERY_S = 30.0
"""Seconds between progress lines in logs; the first and the last batch are always logged."""


class Progress:
    """Counts answered samples; ``update`` after every batch."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        self.last_log = -LOG_EVERY_S
        self.bar = tqdm(total=total, desc=label, unit="sample", leave=False) if sys.stderr.isatty() else None

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.close()

    def update(self, n: int, failed: int) -> None:
        self.done += n
        self.failed += failed
        if self.bar is not None:
            self.bar.update(n)
            self.bar.set_postfix(failed=self.failed)
            return
        now = time.monotonic() - self.start
        if now - self.last_log < LOG_EVERY_S and self.done < self.total:
            return
        self.last_log = now
        rate = self.done / now if now > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        log.info(
            "%s: %d/%d samples (%d failed), %.2f samples/s, ETA %.0f s",
            self.label,
            self.done,
            self.total,
            self.failed,
            rate,
            eta,
        )
