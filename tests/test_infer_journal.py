"""The engine's journal: durable before a batch counts, one fsync per batch, exactly the current records."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from test_infer import CountingAdapter, model, prepared, records

from milebench.benchmarks.milebench.records import PreparedSample
from milebench.infer.engine import cache_key, run_model
from milebench.io import JsonlAppender, atomic_write_jsonl, read_jsonl
from milebench.spec.model import BatchRule


class JournalWatcher(CountingAdapter):
    """Notes, at each call, which samples the journal on disk already holds."""

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self.journal = journal
        self.on_disk: list[list[int]] = []

    def generate(self, samples: Sequence[PreparedSample]) -> list[str]:
        held = [r["sample_id"] for r in read_jsonl(self.journal)] if self.journal.exists() else []
        self.on_disk.append(held)
        return super().generate(samples)


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """File descriptors passed to ``os.fsync``, in call order (the real fsync still runs)."""
    calls: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        calls.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    return calls


def test_appender_fsyncs_every_append_and_keeps_records_readable(tmp_path: Path, synced: list[int]) -> None:
    path = tmp_path / "deep" / "journal.jsonl"
    with JsonlAppender(path) as journal:
        journal.append([{"a": 1}, {"a": 2}])
        assert list(read_jsonl(path)) == [{"a": 1}, {"a": 2}]
        journal.append([{"a": 3}])
        assert len(synced) == 2
    assert list(read_jsonl(path)) == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_each_batch_is_in_the_journal_before_the_next_runs(tmp_path: Path, synced: list[int]) -> None:
    out, journal = tmp_path / "pred.jsonl", tmp_path / "journal" / "pred.jsonl"
    adapter = JournalWatcher(journal)
    run_model(adapter, model(batch=BatchRule(batch_image=2)), [prepared(i) for i in range(5)], out, journal)
    assert adapter.seen == [0, 1, 2, 3, 4]
    assert adapter.on_disk == [[], [0, 1], [0, 1, 2, 3]]
    # One fsync per batch (three) and one for the output; a fresh job has no journal to clean first.
    assert len(synced) == 4


def test_separate_journal_holds_exactly_the_current_records(tmp_path: Path) -> None:
    """Batching by image count answers out of prepared order; the journal keeps finishing order, the
    output prepared order, and both hold one current record per sample."""
    spec = model(batch=BatchRule(batch_image=1))
    samples = [prepared(i, n_images=1 + i % 2) for i in range(6)]
    out, journal = tmp_path / "pred.jsonl", tmp_path / "journal" / "pred.jsonl"
    stale = CountingAdapter()
    run_model(stale, spec, samples[:3], out, journal)
    changed = [s.model_copy(update={"prompt_sha256": "e" * 64}) if s.sample_id == 1 else s for s in samples]
    atomic_write_jsonl(journal, [r.model_dump(mode="json") for r in records(journal)] * 2)

    adapter = CountingAdapter()
    summary = run_model(adapter, spec, changed, out, journal)
    assert adapter.seen == [1, 3, 5, 4]
    assert (summary.reused, summary.generated) == (2, 4)
    assert [r.sample_id for r in records(out)] == [0, 1, 2, 3, 4, 5]
    assert [r.sample_id for r in records(journal)] == [0, 2, 1, 3, 5, 4]
    keys = {s.sample_id: cache_key(spec, s, "test-1") for s in changed}
    assert all(r.cache_key == keys[r.sample_id] for r in records(journal))
    assert sorted(records(journal), key=lambda r: r.sample_id) == records(out)


def test_a_garbage_line_anywhere_is_set_aside_and_only_its_sample_answered_again(tmp_path: Path) -> None:
    spec = model(batch=BatchRule(batch_image=1))
    samples = [prepared(i) for i in range(5)]
    out, journal = tmp_path / "pred.jsonl", tmp_path / "journal" / "pred.jsonl"
    run_model(CountingAdapter(), spec, samples, out, journal)
    lines = journal.read_bytes().splitlines(keepends=True)
    garbage = [b'{"task": "WebQA", "sample_id": 2, "resp\x00\xff\n', b"not json at all\n"]
    # Line 3 (sample 2) is overwritten by garbage, and another garbage line follows line 4.
    journal.write_bytes(b"".join([*lines[:2], garbage[0], lines[3], garbage[1], lines[4]]))
    out.unlink()

    again = CountingAdapter()
    summary = run_model(again, spec, samples, out, journal)
    assert again.seen == [2]
    assert (summary.reused, summary.generated, summary.failed) == (4, 1, 0)
    assert [r.sample_id for r in records(out)] == [0, 1, 2, 3, 4]
    assert sorted(r.sample_id for r in records(journal)) == [0, 1, 2, 3, 4]
    set_aside = list(read_jsonl(journal.with_name("pred.jsonl.corrupt")))
    assert [(row["file"], row["line"]) for row in set_aside] == [(str(journal), 3), (str(journal), 5)]
    assert set_aside[1]["text"] == "not json at all"
    assert set_aside[0]["text"].startswith('{"task": "WebQA", "sample_id": 2, "resp')
