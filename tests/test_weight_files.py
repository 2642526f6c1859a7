"""Url weights (a checkpoint distributed outside the hub) are fetched and used under the data archives'
rules: nothing is used unverified, an unresolved digest refuses to start, a mismatch is quarantined and
named, a cut transfer resumes. Served by a loopback HTTP server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from fetch_helpers import RangeServer

from milebench.data.download import RetryPolicy
from milebench.data.verify import VerificationError
from milebench.data.weight_files import (
    WeightsError,
    fetch_weight_files,
    verified_weight_files,
    weights_cache,
)
from milebench.spec.model import ModelSpec, UrlWeights

BODY = b"tiny checkpoint bytes " * 300
FAST = RetryPolicy(attempts=3, backoff_s=0.0, timeout_s=5.0)


def spec_for(url: str, size: int | None, sha256: str | None) -> ModelSpec:
    return ModelSpec.model_validate(
        {
            "name": "ext",
            "display_name": "ext",
            "section": "kit",
            "adapter": "hf-minigpt-v2",
            "weights": {
                "kind": "url",
                "files": [{"name": "ckpt.pth", "url": url, "size": size, "sha256": sha256, "source": "test"}],
            },
            "max_context_len": 64,
            "n_tokens_per_image": 16,
        }
    )


def good(url: str) -> ModelSpec:
    return spec_for(url, len(BODY), hashlib.sha256(BODY).hexdigest())


def test_a_matching_file_is_fetched_verified_and_then_used(tmp_path: Path) -> None:
    with RangeServer({"ckpt.pth": BODY}) as server:
        spec = good(server.url("ckpt.pth"))
        fetched = fetch_weight_files(spec, tmp_path, FAST)
    assert fetched["ckpt.pth"].read_bytes() == BODY
    assert verified_weight_files(spec, tmp_path) == fetched


def test_a_wrong_hash_fails_closed_naming_the_file_and_quarantines_it(tmp_path: Path) -> None:
    with RangeServer({"ckpt.pth": BODY}) as server:
        spec = spec_for(server.url("ckpt.pth"), len(BODY), "0" * 64)
        with pytest.raises(VerificationError, match=r"weight file ckpt\.pth failed verification"):
            fetch_weight_files(spec, tmp_path, FAST)
    assert not (tmp_path / "ext" / "ckpt.pth").exists()
    assert [p.read_bytes() for p in (tmp_path / "ext" / "quarantine").iterdir()] == [BODY]
    with pytest.raises(
        WeightsError, match=r"ckpt\.pth is missing; run `milebench fetch-weights --model ext`"
    ):
        verified_weight_files(spec, tmp_path)


def test_a_cut_transfer_resumes_and_a_too_short_server_never_passes(tmp_path: Path) -> None:
    with RangeServer({"ckpt.pth": BODY}, cut_first_after=1000) as server:
        fetched = fetch_weight_files(good(server.url("ckpt.pth")), tmp_path, FAST)
        assert server.requests[1]["Range"] == "bytes=1000-"
    assert fetched["ckpt.pth"].read_bytes() == BODY
    short = BODY[: len(BODY) // 2]
    with RangeServer({"ckpt.pth": short}) as server, pytest.raises(Exception, match=r"ckpt\.pth"):
        fetch_weight_files(good(server.url("ckpt.pth")), tmp_path / "other", FAST)
    assert not (tmp_path / "other" / "ext" / "ckpt.pth").exists()


def test_without_a_digest_nothing_is_downloaded_or_used(tmp_path: Path) -> None:
    with RangeServer({"ckpt.pth": BODY}) as server:
        spec = spec_for(server.url("ckpt.pth"), None, None)
        with pytest.raises(WeightsError, match="run `milebench lock-weights` where http"):
            fetch_weight_files(spec, tmp_path, FAST)
        assert server.requests == []
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "ckpt.pth").write_bytes(BODY)
    with pytest.raises(WeightsError, match="no size and sha256"):
        verified_weight_files(spec, tmp_path)


def test_a_file_changed_after_its_check_is_hashed_again_and_refused(tmp_path: Path) -> None:
    with RangeServer({"ckpt.pth": BODY}) as server:
        spec = good(server.url("ckpt.pth"))
        path = fetch_weight_files(spec, tmp_path, FAST)["ckpt.pth"]
    path.write_bytes(BODY[:-1] + b"!")
    with pytest.raises(WeightsError, match=r"ckpt\.pth failed verification.*fetch-weights --model ext"):
        verified_weight_files(spec, tmp_path)


def test_the_cache_follows_the_environment() -> None:
    assert weights_cache({"MILEBENCH_WEIGHTS": "/w"}) == Path("/w")
    assert weights_cache({"HF_HOME": "/models"}) == Path("/models/milebench-weights")


def test_the_paper_spec_names_every_file_and_leaves_no_digest_unsourced() -> None:
    from milebench.benchmarks.milebench.spec.registry import load_specs

    weights = load_specs().models["minigpt-v2"].weights
    assert isinstance(weights, UrlWeights)
    assert {f.name for f in weights.files} == {"minigptv2_checkpoint.pth", "eva_vit_g.pth"}
    assert all(f.source for f in weights.files)
