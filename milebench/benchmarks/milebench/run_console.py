"""What a Snakemake run of MileBench says on its console beyond "N of M steps": a progress line for the
whole run (samples answered, rate, ETA), read from the files the infer jobs already write, and a last
message naming the report and its headline.

The infer jobs run in other processes (or on other hosts), so the run's main process counts their
answers where they land: each cell's journal while it runs, its predictions once it has finished. A file
is read again only when its size or modification time changed.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.plan import cells
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import RunSpec
from milebench.benchmarks.milebench.spec.samples import expected_samples

SAMPLE_ID = re.compile(rb'"sample_id":\s*(-?\d+)')
PROGRESS_EVERY_S = 60.0
"""Seconds between progress lines; a line is written only when samples were answered since the last."""
HEADLINE_IDS = ("pipeline-check", "verdict-summary")
"""The ids of the paragraphs a report can open with (a fixture run's pipeline check, else the verdict);
the first ``<strong>`` after the first of them is the headline."""


@dataclass(frozen=True)
class CellFiles:
    journal: Path
    predictions: Path
    expected: int


class RunProgress:
    """Samples answered over a run's cells, and the rate and ETA since this object was made."""

    def __init__(
        self, specs: Specs, run: RunSpec, paths: RunPaths, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.cells = [
            CellFiles(
                paths.journal(*c),
                paths.predictions(*c),
                expected_samples(specs.tasks[c.task], run),
            )
            for c in cells(specs, run)
        ]
        self.total = sum(c.expected for c in self.cells)
        self.clock = clock
        self.seen: dict[Path, tuple[tuple[int, int], int]] = {}
        self.start_done = self.done()
        self.idle_until = clock()
        """The last time the count was still the start's: the rate counts from there, so the time the run
        spends before its first answer (fetch, preprocessing) does not slow it."""

    def answered(self, path: Path) -> int:
        """The distinct samples ``path`` holds an answer (or a recorded failure) for; 0 without it."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            return 0
        key = (stat.st_size, stat.st_mtime_ns)
        known = self.seen.get(path)
        if known is None or known[0] != key:
            known = (key, len(set(SAMPLE_ID.findall(path.read_bytes()))))
            self.seen[path] = known
        return known[1]

    def done(self) -> int:
        """Samples answered: a finished cell's predictions, else its journal, at most the cell's count."""
        return sum(
            min(c.expected, self.answered(c.predictions) or self.answered(c.journal)) for c in self.cells
        )

    def observe(self) -> int:
        """Samples answered now; moves the rate's start up while this run has answered none (or fewer: a
        re-run job's outputs are deleted before it answers again)."""
        done = self.done()
        if done <= self.start_done:
            self.idle_until = self.clock()
        return done

    def line(self) -> str:
        """Samples answered and their share; the rate since this run's first answers and the ETA at that
        rate, once it has answered any."""
        done = self.observe()
        share = 100 * done / self.total if self.total else 100.0
        head = f"progress: {done:,} of {self.total:,} samples answered ({share:.0f}%)"
        elapsed = self.clock() - self.idle_until
        if done <= self.start_done or elapsed <= 0:
            return head
        rate = (done - self.start_done) / elapsed
        return f"{head}, {rate:.2f} samples/s, ETA {duration(max(0, self.total - done) / rate)}"


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 05 min``: as precise as an estimate deserves (rounded up)."""
    whole = math.ceil(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes = math.ceil(whole / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class ProgressLines:
    """Writes the run's progress line with ``emit`` every ``every_s`` seconds, while samples are
    answered, from a daemon thread; ``stop`` ends it."""

    def __init__(self, progress: RunProgress, emit: Callable[[str], object], every_s: float) -> None:
        self.progress = progress
        self.emit = emit
        self.every_s = every_s
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.watch, name="milebench-progress", daemon=True)

    def watch(self) -> None:
        last = self.progress.start_done
        while not self.stopped.wait(self.every_s):
            done = self.progress.observe()
            if done != last:
                last = done
                self.emit(self.progress.line())

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


class RunConsole:
    """The console of one Snakemake run: ``start`` in its ``onstart`` (never in a dry run, so planning
    reads no file), ``finish`` in ``onsuccess``, ``stop`` in ``onerror``; lines go to ``emit``."""

    def __init__(self, specs: Specs, run: RunSpec, paths: RunPaths, emit: Callable[[str], object]) -> None:
        self.specs, self.run, self.paths, self.emit = specs, run, paths, emit
        self.started = time.time()
        self.lines: ProgressLines | None = None

    def start(self) -> None:
        """Say how much of the run is answered already, then keep saying it while it runs."""
        self.started = time.time()
        progress = RunProgress(self.specs, self.run, self.paths)
        self.emit(progress.line())
        self.lines = ProgressLines(progress, self.emit, PROGRESS_EVERY_S)
        self.lines.thread.start()

    def stop(self) -> None:
        if self.lines is not None:
            self.lines.stop()

    def finish(self) -> None:
        """The last progress line, then the report's path and headline."""
        self.stop()
        if self.lines is not None:
            self.emit(self.lines.progress.line())
        self.emit(finished_message(self.paths.report_html, self.started))


class Headline(HTMLParser):
    """The text of the first ``<strong>`` after the first element whose id is one of :data:`HEADLINE_IDS`."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = self.inside = self.found = False
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if dict(attrs).get("id") in HEADLINE_IDS:
            self.armed = True
        elif self.armed and tag == "strong" and not self.found:
            self.inside = True

    def handle_endtag(self, tag: str) -> None:
        if self.inside and tag == "strong":
            self.inside, self.found = False, True

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def report_headline(html: Path) -> str:
    """The headline ``html`` opens with (the pipeline check on fixture data, else the verdict), as it
    reads there; a sentence saying so without one."""
    parser = Headline()
    parser.feed(html.read_text(encoding="utf-8"))
    return " ".join("".join(parser.parts).split()) or "The report gives no verdict against the paper."


def finished_message(html: Path, started: float) -> str:
    """The run's last words: where its report is and what its headline says. A report this run did not
    write (a target short of it) is named as such; none at all, too."""
    if not html.is_file():
        return f"finished; no report yet at {html} (the targets asked for stop short of it)"
    stale = "" if html.stat().st_mtime >= started else " (not rebuilt by this run)"
    return f"report: {html}{stale}\n{report_headline(html)}"
