"""The mini-MileBench generator and packer: upstream format, coverage, and byte-for-byte determinism."""

from __future__ import annotations

import gzip
import io
import json
import math
import re
import tarfile
from pathlib import Path

import pytest
from mini_specs import MINI_TASKS
from PIL import Image

from milebench.benchmarks.milebench.data.schema import TaskFile, quantity_level
from milebench.benchmarks.milebench.data.validate import validate_tree
from milebench.benchmarks.milebench.fixture.generate import write_tree
from milebench.benchmarks.milebench.fixture.pack import LOCK_NAME, archive_name, pack_mirror
from milebench.benchmarks.milebench.fixture.words import PARAPHRASE, paraphrase
from milebench.benchmarks.milebench.spec.data_lock import load_lock
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.task import QuestionType
from milebench.cli import main
from milebench.io import sha256_file

SAMPLES = 3
BY_NAME = {spec.name: spec for spec in MINI_TASKS}


def build(base: Path, seed: int, tasks=MINI_TASKS, samples: int = SAMPLES) -> tuple[Path, Path]:
    tree = write_tree(base / "tree", tasks, seed, samples)
    pack_mirror(tree, base / "mirror", seed=seed)
    return tree, base / "mirror"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build(tmp_path_factory.mktemp("seed7"), seed=7)


@pytest.fixture(scope="module")
def task_files(built: tuple[Path, Path]) -> dict[str, TaskFile]:
    tree, _ = built
    return {
        path.name.removesuffix(".json"): TaskFile.model_validate_json(path.read_bytes())
        for path in tree.glob("*/*.json")
    }


def samples_of(task_files: dict[str, TaskFile]):
    return [(name, s) for name, f in sorted(task_files.items()) for s in f.data]


def test_same_seed_gives_identical_archives_and_lock(built, tmp_path):
    _, first = built
    _, second = build(tmp_path, seed=7)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    assert names == sorted([LOCK_NAME, *(archive_name(k) for k in range(6))])
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_different_seed_changes_every_digest(built, tmp_path):
    _, first = built
    _, other = build(tmp_path, seed=8)
    digests = {e.name: e.sha256 for e in load_lock(first / LOCK_NAME).archives}
    for entry in load_lock(other / LOCK_NAME).archives:
        assert entry.sha256 != digests[entry.name]


def test_lock_pins_every_archive(built):
    _, mirror = built
    lock = load_lock(mirror / LOCK_NAME)
    assert lock.repo_id is None and lock.revision is None
    assert lock.note == "generated mini-MileBench, seed 7"
    assert [e.name for e in lock.archives] == [archive_name(k) for k in range(6)]
    for entry in lock.archives:
        assert entry.size == (mirror / entry.name).stat().st_size
        assert entry.sha256 == sha256_file(mirror / entry.name)


def test_archives_are_normalised_and_hold_the_tree(built):
    tree, mirror = built
    seen_tasks = set()
    for k in range(6):
        raw = (mirror / archive_name(k)).read_bytes()
        assert raw[3] == 0, "gzip header must carry no file name"
        assert raw[4:8] == b"\0\0\0\0", "gzip header mtime must be 0"
        with tarfile.open(fileobj=gzip.GzipFile(fileobj=io.BytesIO(raw))) as tar:
            members = tar.getmembers()
            names = [m.name for m in members]
            assert names == sorted(names)
            assert all(n == "MileBench" or n.startswith("MileBench/") for n in names)
            for m in members:
                assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", "")
                assert m.mode == (0o755 if m.isdir() else 0o644)
                if m.isfile():
                    on_disk = tree.parent / m.name
                    assert tar.extractfile(m).read() == on_disk.read_bytes(), m.name
            seen_tasks |= {n.split("/")[1] for n in names if n.count("/") == 1}
    assert seen_tasks == set(BY_NAME)


def test_tree_passes_validation(built):
    tree, _ = built
    assert validate_tree(tree, MINI_TASKS, expected_samples=SAMPLES) == []


def test_upstream_layout_and_meta_data(built, task_files):
    tree, _ = built
    for spec in MINI_TASKS:
        meta = json.loads((tree / spec.name / f"{spec.name}.json").read_text())["meta_data"]
        assert meta["question_type"] == spec.question_type.value
        assert meta["dataset"] == spec.name and meta["num_sample"] == SAMPLES
        assert 2 <= len(meta["task_instruction"]) <= 3
        assert (tree / spec.name / "images").is_dir() and (tree / spec.name / "combined_1_images").is_dir()
        ids = [s.task_instruction_id for s in task_files[spec.name].data]
        assert len(set(ids)) > 1, f"{spec.name}: task_instruction_id should vary"


def test_adversarial_files_exactly_where_the_spec_has_them(built):
    tree, _ = built
    for spec in MINI_TASKS:
        assert (tree / spec.name / f"{spec.name}-adv.json").exists() is spec.has_adversarial, spec.name


def test_adversarial_options_are_reordered_paraphrases(task_files):
    for spec in MINI_TASKS:
        if not spec.has_adversarial:
            continue
        for test, adv in zip(task_files[spec.name].data, task_files[f"{spec.name}-adv"].data, strict=True):
            assert adv.sample_id == test.sample_id
            assert adv.task_instance.images_path == test.task_instance.images_path
            assert adv.response == paraphrase(test.response)
            if spec.question_type is QuestionType.MULTI_CHOICE:
                reworded = [paraphrase(c) for c in test.task_instance.choice_list]
                assert sorted(adv.task_instance.choice_list) == sorted(reworded)
                assert adv.task_instance.choice_list != reworded
                assert adv.response in adv.task_instance.choice_list
    adv_words = {w for name, s in samples_of(task_files) if name.endswith("-adv") for w in s.response.split()}
    assert adv_words & set(PARAPHRASE.values()), "some adversarial answers must actually be reworded"


def test_multi_choice_responses_are_options(task_files):
    for name, sample in samples_of(task_files):
        spec = BY_NAME[name.removesuffix("-adv")]
        if spec.question_type is QuestionType.MULTI_CHOICE:
            assert sample.response in sample.task_instance.choice_list
            assert len(set(sample.task_instance.choice_list)) == len(sample.task_instance.choice_list)
        else:
            assert sample.task_instance.choice_list is None


def test_image_counts_cover_every_level_and_exceed_32(task_files):
    counts = [len(s.task_instance.images_path) for _, s in samples_of(task_files)]
    assert max(counts) > 32
    assert {quantity_level(n) for n in counts} == {"Few", "Medium", "Many"}
    for _, sample in samples_of(task_files):
        assert sample.image_quantity_level == quantity_level(len(sample.task_instance.images_path))


def test_retrieval_task_has_more_than_26_unlabelled_options(task_files):
    for sample in task_files["GPR1200"].data:
        options = sample.task_instance.choice_list
        assert 30 <= len(options) <= 40
        assert not any(re.match(r"^[A-Z]\. ", o) for o in options)


def test_placeholders_match_images_and_tables(task_files):
    for name, sample in samples_of(task_files):
        instance = sample.task_instance
        # each picture is referenced exactly once, so placeholders and images pair up one to one
        indices = sorted(int(i) for i in re.findall(r"\{(?:image|table)#(\d+)\}", instance.context))
        assert indices == list(range(1, len(instance.images_path) + 1)), name
    tables = [s for s in task_files["SlideVQA"].data if "{table#" in s.task_instance.context]
    assert tables and all(any(p.endswith(".png") for p in s.task_instance.images_path) for s in tables)


def test_needles(built, task_files):
    tree, _ = built
    for sample in task_files["TextNeedleInAHaystack"].data:
        assert re.fullmatch(r"[a-z]+", sample.response)
        assert f"code word is {sample.response}." in sample.task_instance.context
    for sample in task_files["ImageNeedleInAHaystack"].data:
        assert sample.response not in sample.task_instance.context
        folder = tree / "ImageNeedleInAHaystack" / "images"
        backgrounds = [_modal_grey(folder / p) for p in sample.task_instance.images_path]
        assert sum(g > 240 for g in backgrounds) == 1, "exactly one image is the white card with the word"


def _modal_grey(path: Path) -> int:
    """The most frequent grey level: a scene's background is at most 200, the needle card is white."""
    with Image.open(path) as image:
        histogram = image.convert("L").histogram()
    return histogram.index(max(histogram))


def test_dialogue_context_has_history(task_files):
    for sample in task_files["MMCoQA"].data:
        context = sample.task_instance.context
        assert "Conversation history:" in context and "\nQ: " in context and "\nA: " in context


def test_images_are_tiny_and_combined_picture_tiles_them(built, task_files):
    tree, _ = built
    sample = max(task_files["GPR1200"].data, key=lambda s: len(s.task_instance.images_path))
    for name in sample.task_instance.images_path:
        with Image.open(tree / "GPR1200" / "images" / name) as image:
            assert max(image.size) <= 64
    (combined,) = sample.task_instance.combined_1_images
    assert combined == f"{sample.sample_id}-0.jpg"
    n = len(sample.task_instance.images_path)
    cols = math.ceil(math.sqrt(n))
    with Image.open(tree / "GPR1200" / "combined_1_images" / combined) as image:
        assert image.format == "JPEG"
        assert image.size == (cols * 32, math.ceil(n / cols) * 32)


def test_paraphrase_is_injective_and_never_maps_onto_a_source_word():
    assert len(set(PARAPHRASE.values())) == len(PARAPHRASE)
    assert not set(PARAPHRASE.values()) & set(PARAPHRASE)


def test_all_specified_tasks_via_cli(tmp_path):
    mirror = tmp_path / "mirror"
    assert main(["fixture", "--out", str(mirror), "--seed", "3", "--samples-per-task", "2"]) == 0
    specs = load_specs()
    assert len(specs.tasks) == 29
    assert load_lock(mirror / LOCK_NAME).note == "generated mini-MileBench, seed 3"
    for k in range(6):
        with tarfile.open(mirror / archive_name(k)) as tar:
            tar.extractall(tmp_path / "data", filter="data")
    tree = tmp_path / "data" / "MileBench"
    assert sorted(p.name for p in tree.iterdir()) == sorted(specs.tasks)
    assert main(["validate-data", str(tree), "--samples-per-task", "2"]) == 0
    n_adv = len(list(tree.glob("*/*-adv.json")))
    assert n_adv == sum(spec.has_adversarial for spec in specs.tasks.values()) == 26
