"""Prompt rules stated as facts: tiling that divides evenly, the range of image references, the budget."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest
import yaml
from huggingface_hub import constants as hub_constants
from PIL import Image
from test_prompt import build_one, sample_json, task_spec, write_task
from test_score_command import paths_of, specs_dir  # noqa: F401
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast
from transformers.tokenization_python import PythonBackend

from milebench.benchmarks.milebench.data.schema import TaskFile
from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.preprocess import combine, commands
from milebench.benchmarks.milebench.preprocess.commands import read_task_file
from milebench.benchmarks.milebench.preprocess.prepare import kit_pictures, load_budget, prepare_task
from milebench.benchmarks.milebench.preprocess.prompt import PreprocessError, build_sample
from milebench.benchmarks.milebench.preprocess.regime import (
    UNLIMITED,
    Regime,
    TokenizerSource,
    model_regime,
    regime_for,
    tokenizer_dirs,
)
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import CombinedSource, Mode, RunSpec, TruncationMode
from milebench.infer.tiny import build_tokenizer
from milebench.io import read_jsonl
from milebench.preprocess.tokenizer import HFTokenizer, TokenizerError, load_tokenizer
from milebench.spec.base import SpecError
from milebench.spec.model import ImageInput, ModelSpec
from milebench.stage_inputs import MissingInput


@pytest.mark.parametrize(
    ("n_images", "n_pictures", "sizes"),
    [(6, 3, [2, 2, 2]), (8, 2, [4, 4]), (4, 4, [1, 1, 1, 1]), (9, 1, [9])],
)
def test_images_that_divide_evenly_fill_every_picture_alike(
    n_images: int, n_pictures: int, sizes: list[int]
) -> None:
    """``(n - 1) // N + 1`` images per picture: exactly n / N when N divides n, so N pictures."""
    groups = combine.groups(n_images, n_pictures)
    assert [len(g) for g in groups] == sizes
    assert [i for g in groups for i in g] == list(range(n_images))


def test_pictures_are_labelled_with_global_image_numbers(tmp_path: Path) -> None:
    paths = [tmp_path / f"{i}.png" for i in range(6)]
    jobs = combine.sample_jobs(paths, [f"{i}" * 64 for i in range(6)], 3)
    assert [(job.paths, job.first_index) for job in jobs] == [
        (tuple(paths[0:2]), 0),
        (tuple(paths[2:4]), 2),
        (tuple(paths[4:6]), 4),
    ]
    assert [job.sha256 for job in jobs][1] == ("2" * 64, "3" * 64)


# --- image references ----------------------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["{image#0}", "{table#0}", "{image#3}"])
def test_a_reference_outside_1_to_n_is_refused(tmp_path: Path, reference: str) -> None:
    """The official loop replaces ``{image#i}`` for i = 1..n only, so ``{image#0}`` and ``{image#n+1}`` would
    stay in the prompt as text: the kit refuses such a sample (naming it) instead of sending that."""
    sample = sample_json(f"{{image#1}}{reference} What?", ["a.png", "b.png"], ["cat"])
    with pytest.raises(PreprocessError) as err:
        build_one(tmp_path, task_spec(), sample)
    assert str(err.value).endswith(
        f"WebQA.json: task WebQA, sample 7: context refers to {reference} but the sample has 2 image(s)"
    )


def test_references_1_to_n_become_placeholders(tmp_path: Path) -> None:
    sample = sample_json("{image#1} and {table#2}: which?", ["a.png", "b.png"], ["cat"])
    prepared = build_one(tmp_path, task_spec(), sample)
    assert prepared.context.startswith("<ImageHere> and <ImageHere>: which?")


def test_an_instruction_id_indexes_the_task_s_instructions(tmp_path: Path) -> None:
    """The test task file lists two instructions: id 1 is the last one, id 2 is past the end."""
    last = build_one(
        tmp_path / "a", task_spec(), sample_json("{image#1}", ["a.png"], ["cat"], instruction_id=1)
    )
    assert last.instruction == "Say it."
    with pytest.raises(PreprocessError) as err:
        build_one(tmp_path / "b", task_spec(), sample_json("{image#1}", ["a.png"], ["cat"], instruction_id=2))
    assert str(err.value).endswith(
        "WebQA.json: task WebQA, sample 7: task_instruction_id 2 is out of range "
        "(meta_data.task_instruction has 2 entries)"
    )


def test_a_task_file_of_another_question_type_is_refused_by_name(tmp_path: Path) -> None:
    spec = task_spec()  # multi-choice
    source = write_task(tmp_path, spec.name, [sample_json("{image#1}", ["a.png"], ["cat"])], "open-ended")
    task_file = TaskFile.model_validate_json(source.read_text())
    with pytest.raises(PreprocessError) as err:
        build_sample(spec, task_file.meta_data, task_file.data[0], Mode.MULTI_IMAGE, tmp_path, source)
    assert str(err.value) == (
        f"{source}: task WebQA, sample 7: question_type open-ended differs from the task spec (multi-choice)"
    )


@pytest.mark.parametrize(("mode", "colour"), [("I", 1000), ("F", 0.5), ("CMYK", (10, 20, 30, 40))])
def test_every_image_is_tiled_as_its_rgba_conversion(mode: str, colour: object) -> None:
    """The official script converts each resized image to RGBA before drawing its label."""
    image = Image.new(mode, (40, 30), colour)
    assert (
        combine.tile(image, "Image 1").tobytes() == combine.tile(image.convert("RGBA"), "Image 1").tobytes()
    )


def test_combined_mode_names_the_folder_it_needs_one_entry_of(tmp_path: Path) -> None:
    sample = sample_json("{image#1}", ["a.png"], ["cat"])
    sample["task_instance"]["combined_1_images"] = ["c1.jpg", "c2.jpg"]
    with pytest.raises(PreprocessError) as err:
        build_one(tmp_path, task_spec(), sample, Mode.COMBINED_IMAGE)
    assert str(err.value).endswith(
        "sample 7: combined-image mode needs exactly one combined_1_images entry, got 2"
    )


# --- regimes and their tokenizers ------------------------------------------------------------------


def run_spec(**changes: object) -> RunSpec:
    return RunSpec.model_validate(
        {"name": "t", "description": "d", "models": ["m"], "data": {"kind": "fixture"}, **changes}
    )


def tiny_model(**changes: object) -> ModelSpec:
    weights = {"kind": "tiny", "family": "llava"}
    fields = {"name": "tiny", "display_name": "t", "section": "kit", "adapter": "hf-llava",
              "weights": weights, "max_context_len": 96, "n_tokens_per_image": 16}  # fmt: skip
    return ModelSpec.model_validate(fields | changes)


def test_only_a_kit_built_tokenizer_is_a_folder_the_job_reads(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    tiny = regime_for(tiny_model(), run_spec(), Mode.MULTI_IMAGE, tmp_path)
    assert tokenizer_dirs(tiny, paths) == [paths.model_dir("tiny")]
    hub = regime_for(tiny_model(name="hub", weights={"kind": "hf", "repo_id": "org/m", "revision": "a" * 40}),
                     run_spec(), Mode.MULTI_IMAGE, tmp_path)  # fmt: skip
    assert hub.tokenizer == TokenizerSource(kind="hub", name="org/m", revision="a" * 40)
    assert tokenizer_dirs(hub, paths) == []
    unknown = tiny_model(max_context_len=None, notes="n")
    assert tokenizer_dirs(regime_for(unknown, run_spec(), Mode.MULTI_IMAGE, tmp_path), paths) == []


def test_the_budget_holds_the_regime_s_settings(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    build_tokenizer().save_pretrained(paths.model_dir("tiny"))
    interleaved = load_budget(regime_for(tiny_model(), run_spec(), Mode.MULTI_IMAGE, tmp_path), paths)
    assert interleaved is not None
    assert (interleaved.max_context_len, interleaved.n_tokens_per_image, interleaved.mode) == (
        96, 16, TruncationMode.PAPER
    )  # fmt: skip
    assert interleaved.tokenizer.encode(["Answer the question"]) == [
        build_tokenizer()("Answer the question").input_ids
    ]
    combined = load_budget(
        regime_for(tiny_model(), run_spec(truncation="clean"), Mode.COMBINED_IMAGE, tmp_path), paths
    )
    assert combined is not None
    assert (combined.n_tokens_per_image, combined.mode) == (
        0,
        TruncationMode.CLEAN,
    )  # pictures cost no tokens
    assert load_budget(regime_for(tiny_model(max_context_len=None, notes="n"), run_spec(), Mode.MULTI_IMAGE,
                                  tmp_path), paths) is None  # fmt: skip


def test_a_spec_s_own_tokenizer_counts_for_weights_the_kit_does_not_hold(tmp_path: Path) -> None:
    """An API model (no weights) counts its tokens with the hub tokenizer its spec names."""
    api = tiny_model(name="api", weights={"kind": "api", "provider": "openai", "model_id": "gpt"},
                     tokenizer="org/tok")  # fmt: skip
    regime = regime_for(api, run_spec(), Mode.MULTI_IMAGE, tmp_path)
    assert regime.tokenizer == TokenizerSource(kind="hub", name="org/tok", revision=None)


def test_hub_weights_without_a_revision_count_with_the_locked_commit(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "weights.lock.yaml").write_text(yaml.safe_dump({"revisions": {"hub": "d" * 40}}))
    weights = {"kind": "hf", "repo_id": "org/m", "revision": None}
    regime = regime_for(tiny_model(name="hub", weights=weights), run_spec(), Mode.MULTI_IMAGE, tmp_path)
    assert regime.tokenizer == TokenizerSource(kind="hub", name="org/m", revision="d" * 40)


def test_only_interleaved_images_need_a_per_image_token_count_to_be_budgeted(tmp_path: Path) -> None:
    """Combined pictures cost no tokens, so a model without ``n_tokens_per_image`` is still cut to its
    context there; in interleaved mode the same model cannot be budgeted and reads the prompts whole."""
    model = tiny_model(n_tokens_per_image=None, notes="per-image cost unknown")
    combined = regime_for(model, run_spec(), Mode.COMBINED_IMAGE, tmp_path)
    assert (combined.max_context_len, combined.n_tokens_per_image) == (96, None)
    assert combined.tokenizer == TokenizerSource(kind="model-dir", name="tiny")
    interleaved = regime_for(model, run_spec(), Mode.MULTI_IMAGE, tmp_path)
    assert (interleaved.max_context_len, interleaved.tokenizer, interleaved.truncation) == (None, None, None)


def test_a_hub_tokenizer_is_loaded_at_its_pinned_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hub cache holding the tokenizer only under its commit (no branch ref): offline, the pinned
    revision loads and the default branch does not exist."""
    commit = "c" * 40
    repo = tmp_path / "hub" / "models--org--tok"
    build_tokenizer().save_pretrained(repo / "snapshots" / commit)
    (repo / ".no_exist" / commit).mkdir(parents=True)
    (repo / ".no_exist" / commit / "config.json").touch()  # the cache's record of a file the repo lacks
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))  # where the hub client looks
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    weights = {"kind": "hf", "repo_id": "org/tok", "revision": commit}
    regime = regime_for(tiny_model(name="hub", weights=weights), run_spec(), Mode.MULTI_IMAGE, tmp_path)
    budget = load_budget(regime, RunPaths(out=tmp_path, reports=tmp_path))
    assert budget is not None and budget.tokenizer.name == "org/tok"
    with pytest.raises(TokenizerError, match=r"^cannot load tokenizer org/tok: "):
        load_tokenizer("org/tok")


@pytest.mark.parametrize(
    ("revision", "trust_remote_code", "warned"),
    [(None, True, True), ("c" * 40, True, False), (None, False, False)],
)
def test_remote_tokenizer_code_at_no_pinned_revision_is_warned_about(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    revision: str | None,
    trust_remote_code: bool,
    warned: bool,
) -> None:
    """Only a hub repo's own tokenizer code at its moving main is warned about (offline: it then fails)."""
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    build_tokenizer().save_pretrained(tmp_path / "local")
    with caplog.at_level(logging.WARNING, logger="milebench.preprocess.tokenizer"):
        load_tokenizer(tmp_path / "local", None, trust_remote_code)  # a local folder is never warned about
        with pytest.raises(TokenizerError):
            load_tokenizer("org/tok", revision, trust_remote_code)
    warning = (
        "tokenizer org/tok runs the repository's own code at its current main: pin its revision in "
        "specs/locks/weights.lock.yaml (milebench lock-weights) so the counting code cannot change"
    )
    assert caplog.messages == ([warning] if warned else [])


def bos_tokenizer() -> HFTokenizer:
    """One token per word, and a [BOS] the tokenizer adds unless told not to."""
    words = Tokenizer(models.WordLevel({"[UNK]": 0, "[BOS]": 1, "one": 2, "two": 3}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    words.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", 1)])
    return HFTokenizer(PreTrainedTokenizerFast(tokenizer_object=words, bos_token="[BOS]"), "bos")


def test_tokens_are_counted_without_special_tokens() -> None:
    tokenizer = bos_tokenizer()
    assert tokenizer.tokenizer("one two").input_ids == [1, 2, 3]  # what the tokenizer adds by default
    assert tokenizer.encode(["one two", "two"]) == [[2, 3], [3]]
    assert tokenizer.offsets("one two") == [(0, 3), (4, 7)]
    assert tokenizer.encode([]) == []


class WordsTokenizer(PythonBackend):
    """A slow (pure Python) tokenizer: one token per word, no offsets."""

    def __init__(self) -> None:
        self.vocab = {"[UNK]": 0, "one": 1, "two": 2}
        super().__init__(unk_token="[UNK]")

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def _tokenize(self, text: str, **kwargs: object) -> list[str]:
        return text.split()

    def _convert_token_to_id(self, token: str) -> int:
        return self.vocab.get(token, 0)

    def _convert_id_to_token(self, index: int) -> str:
        return {i: t for t, i in self.vocab.items()}[index]


def test_clean_truncation_needs_a_fast_tokenizer() -> None:
    slow = HFTokenizer(WordsTokenizer(), "slow-words")
    assert slow.encode(["one two"]) == [[1, 2]]
    with pytest.raises(TokenizerError) as err:
        slow.offsets("one two")
    assert str(err.value) == "tokenizer slow-words: clean truncation needs a fast tokenizer (offsets)"


def test_a_tokenizer_that_cannot_load_is_named(tmp_path: Path) -> None:
    with pytest.raises(TokenizerError) as err:
        load_tokenizer(tmp_path / "nothing-here")
    assert str(err.value).startswith(f"cannot load tokenizer {tmp_path / 'nothing-here'}: ")
    build_tokenizer().save_pretrained(tmp_path / "tok")
    assert load_tokenizer(tmp_path / "tok").name == str(tmp_path / "tok")


# --- whole tasks -----------------------------------------------------------------------------------


def on_disk(root: Path) -> RunPaths:
    """The score tests' specs folder, with ActionSequence's upstream file in the run's data folder."""
    paths = paths_of(root)
    samples = [sample_json("{image#1}Which?", ["a.png"], ["x", "y"], "x", sample_id=i) for i in (0, 1)]
    write_task(paths.data_root, "ActionSequence", samples)
    return paths


def preprocess_args(specs: Path, **changes: object) -> argparse.Namespace:
    fields = dict(run="t", task="ActionSequence", mode=Mode.MULTI_IMAGE, regime=UNLIMITED_REGIME, workers=1,
                  specs=specs, root=Path("."))  # fmt: skip
    return argparse.Namespace(**(fields | changes))


def test_preprocess_reads_the_specs_folder_it_is_given(specs_dir: Path) -> None:  # noqa: F811
    paths = on_disk(specs_dir)
    assert commands.preprocess(preprocess_args(specs_dir)) == 0
    rows = list(read_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE)))
    assert [r["sample_id"] for r in rows] == [0, 1]
    manifest = json.loads(paths.prepared_manifest("ActionSequence", Mode.MULTI_IMAGE).read_text())
    source = paths.data_root / "ActionSequence" / "ActionSequence.json"
    assert (manifest["source"], manifest["n_samples"], manifest["n_prepared"]) == (str(source), 2, 2)


def test_preprocess_names_what_it_does_not_know(specs_dir: Path) -> None:  # noqa: F811
    on_disk(specs_dir)
    with pytest.raises(SpecError) as err:
        commands.preprocess(preprocess_args(specs_dir, regime="ctx1-paper-0"))
    assert str(err.value) == (
        f"{specs_dir}/runs/t.yaml: models: no model of run 't' reads regime 'ctx1-paper-0' in mode "
        f"multi-image; known: {UNLIMITED_REGIME}"
    )
    with pytest.raises(SpecError) as err:
        commands.preprocess(preprocess_args(specs_dir, task="NoSuchTask"))
    known = ", ".join(sorted(load_specs(specs_dir).tasks))
    assert str(err.value) == f"{specs_dir}/tasks: name: no task spec 'NoSuchTask'; known: {known}"


def test_a_model_reading_combined_pictures_gets_them_in_multi_image_mode_too(tmp_path: Path) -> None:
    """The regime, not the mode, decides: a combined-input model reads the picture and its text markers."""
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    source = write_task(paths.data_root, "WebQA", [sample_json("{image#1} Q?", ["a.png"], ["cat", "dog"])])
    task_file = TaskFile.model_validate_json(source.read_text())
    regime = Regime(
        image_input=ImageInput.COMBINED, combined_pictures=1, combined_source=CombinedSource.UPSTREAM
    )
    prepared = prepare_task(task_spec(), task_file, source, Mode.MULTI_IMAGE, regime, None, paths, False)
    [only] = prepared.samples
    assert only.images == ("WebQA/combined_1_images/c7.jpg",)
    assert only.context.startswith("<Image 1>  Q?")


def test_a_sample_without_its_images_does_not_stop_the_others_from_being_tiled(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    samples = [sample_json("{image#1} Q?", ["a.png"], ["cat"], sample_id=i) for i in (1, 2)]
    source = write_task(paths.data_root, "WebQA", samples)
    (paths.data_root / "WebQA" / "images" / "a.png").unlink()  # both samples name it; restore it for one
    task_file = TaskFile.model_validate_json(source.read_text())
    broken = task_file.data[0]
    fine = task_file.data[1].model_copy(
        update={
            "task_instance": task_file.data[1].task_instance.model_copy(update={"images_path": ["b.png"]})
        }
    )
    Image.new("RGB", (8, 8)).save(paths.data_root / "WebQA" / "images" / "b.png")
    tiles = paths.tiles("WebQA", Mode.MULTI_IMAGE)
    pictures = kit_pictures("WebQA", [broken, fine], source, paths, tiles, 1, 1, 10_000)
    assert isinstance(pictures[1], PreprocessError)
    assert str(pictures[1]).startswith(f"{source}: task WebQA, sample 1: image file not found: ")
    assert isinstance(pictures[2], list) and len(pictures[2]) == 1


def test_an_image_path_outside_the_task_folder_stops_only_its_sample(tmp_path: Path) -> None:
    paths = RunPaths(out=tmp_path, reports=tmp_path)
    samples = [sample_json("{image#1} Q?", ["a.png"], ["cat"], sample_id=i) for i in (1, 2)]
    source = write_task(paths.data_root, "WebQA", samples)
    task_file = TaskFile.model_validate_json(source.read_text())
    first = task_file.data[0]
    escaping = first.model_copy(
        update={"task_instance": first.task_instance.model_copy(update={"images_path": ["/abs.png"]})}
    )
    tiles = paths.tiles("WebQA", Mode.MULTI_IMAGE)
    pictures = kit_pictures("WebQA", [escaping, task_file.data[1]], source, paths, tiles, 1, 1, 10_000)
    assert str(pictures[1]) == (
        f"{source}: task WebQA, sample 1: task_instance.images_path entry '/abs.png' is an absolute path; "
        "entries name files under WebQA/images/"
    )
    assert isinstance(pictures[2], list) and len(pictures[2]) == 1


def test_preprocess_reads_and_writes_under_the_root_it_is_given(
    specs_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run with a relative output folder is laid out under --root, wherever the command runs."""
    run_path = specs_dir / "runs" / "t.yaml"
    run_path.write_text(yaml.safe_dump({**yaml.safe_load(run_path.read_text()), "output_dir": "results/t"}))
    staged = tmp_path / "staged"
    paths = RunPaths.for_run(RunSpec.model_validate(yaml.safe_load(run_path.read_text())), base=staged)
    samples = [sample_json("{image#1}Which?", ["a.png"], ["x", "y"], "x", sample_id=0)]
    write_task(paths.data_root, "ActionSequence", samples)
    monkeypatch.chdir(tmp_path)
    assert commands.preprocess(preprocess_args(specs_dir, root=staged)) == 0
    assert [r["sample_id"] for r in read_jsonl(paths.prepared("ActionSequence", Mode.MULTI_IMAGE))] == [0]


def with_tiny_model(specs_dir: Path) -> str:  # noqa: F811
    """Run t reads a tiny model beside the random one; returns the tiny model's multi-image regime id."""
    dumped = tiny_model().model_dump(mode="json", exclude_none=True)
    (specs_dir / "models" / "tiny.yaml").write_text(yaml.safe_dump(dumped))
    run_path = specs_dir / "runs" / "t.yaml"
    run = yaml.safe_load(run_path.read_text())
    run_path.write_text(yaml.safe_dump({**run, "models": ["random", "tiny"]}))
    specs = load_specs(specs_dir)
    return model_regime(specs, specs.run("t"), "tiny", Mode.MULTI_IMAGE).id


def test_an_unknown_regime_is_refused_listing_the_mode_s_regimes(specs_dir: Path) -> None:  # noqa: F811
    tiny = with_tiny_model(specs_dir)
    with pytest.raises(SpecError) as err:
        commands.preprocess(preprocess_args(specs_dir, regime="nothing"))
    assert str(err.value) == (
        f"{specs_dir}/runs/t.yaml: models: no model of run 't' reads regime 'nothing' in mode multi-image; "
        f"known: {UNLIMITED_REGIME}, {tiny}"
    )


def test_preprocess_names_the_inputs_it_lacks_and_their_commands(specs_dir: Path) -> None:  # noqa: F811
    tiny = with_tiny_model(specs_dir)
    paths = paths_of(specs_dir)
    with pytest.raises(MissingInput) as err:
        commands.preprocess(preprocess_args(specs_dir))
    source = paths.data_root / "ActionSequence" / "ActionSequence.json"
    assert str(err.value) == f"{source}: task file not found; run `milebench fetch --run t` first"
    on_disk(specs_dir)
    with pytest.raises(MissingInput) as err:
        commands.preprocess(preprocess_args(specs_dir, regime=tiny))
    assert str(err.value) == (
        f"{paths.model_dir('tiny')}: tiny model checkpoint not found; run `milebench tiny-model --run t "
        "--model tiny` first"
    )


def test_a_task_file_that_cannot_be_read_is_named_with_the_field(tmp_path: Path) -> None:
    missing = tmp_path / "T" / "T.json"
    with pytest.raises(PreprocessError) as err:
        read_task_file(missing)
    assert str(err.value) == f"{missing}: task file not found (has the data been fetched?)"
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(PreprocessError) as err:
        read_task_file(bad)
    assert str(err.value) == (
        f"{bad}: invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    wrong = tmp_path / "wrong.json"
    meta = {"task_instruction": ["x"], "question_type": "open-ended"}
    wrong.write_text(json.dumps({"meta_data": meta, "data": [{"sample_id": 0}]}))
    with pytest.raises(SpecError) as err:
        read_task_file(wrong)
    assert str(err.value).splitlines()[0] == f"{wrong}: data.0.task_instruction_id: Field required"


def test_an_unknown_model_is_named_with_the_models_folder(specs_dir: Path) -> None:  # noqa: F811
    specs = load_specs(specs_dir)
    with pytest.raises(SpecError) as err:
        model_regime(specs, specs.run("t"), "nobody", Mode.MULTI_IMAGE)
    known = ", ".join(sorted(specs.models))
    assert str(err.value) == f"{specs_dir}/models: name: no model spec 'nobody'; known: {known}"


def test_a_regime_reads_as_words_and_keeps_its_id_for_files() -> None:
    """The report shows the label; the id (with its settings hash) names the prepared files."""
    tokenizer = TokenizerSource(kind="model-dir", name="tiny-llava")
    budgeted = Regime(
        image_input=ImageInput.INTERLEAVED,
        max_context_len=2048,
        n_tokens_per_image=576,
        tokenizer=tokenizer,
        truncation=TruncationMode.PAPER,
    )
    assert budgeted.id.startswith("ctx2048-paper-")
    assert budgeted.label == "context 2048, 576 tokens per image, paper truncation"
    one = budgeted.model_copy(update={"n_tokens_per_image": 1, "truncation": TruncationMode.CLEAN})
    assert one.label == "context 2048, 1 token per image, clean truncation"
    combined = budgeted.model_copy(
        update={"image_input": ImageInput.COMBINED, "max_context_len": 4096, "n_tokens_per_image": None,
                "combined_pictures": 4, "combined_source": CombinedSource.KIT}
    )  # fmt: skip
    assert combined.label == "context 4096, paper truncation, 4 combined pictures made by the kit"
    assert UNLIMITED.label == "no token budget" and UNLIMITED.id == UNLIMITED_REGIME
