"""Execution as data: LLaVA's official turn format, expand2square padding, chunk-wise tokenization,
per-sample decoding, stop strings, added-token suppression, and variants selected by name."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from picture_samples import picture_sample, write_pictures
from PIL import Image
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import CLIPImageProcessor, LlavaForConditionalGeneration, PreTrainedTokenizerFast

from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.provenance import job_provenance
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.commands.specs import check
from milebench.infer.adapter import AdapterError
from milebench.infer.chunk_tokens import per_chunk_ids
from milebench.infer.engine import cache_key
from milebench.infer.hf_llava import HfLlavaAdapter
from milebench.infer.hf_mantis import mllava_v1
from milebench.infer.hf_yi_vl import yi_mm_default
from milebench.infer.image_preprocessing import expand_to_square, mean_colour, preprocess
from milebench.infer.prompt_templates import llava_llama_2
from milebench.infer.registry import load_adapter
from milebench.infer.stopping import KeywordStop, NewTextStop
from milebench.infer.tiny import build_tiny, build_tokenizer
from milebench.spec.base import SpecError
from milebench.spec.execution import PAPER, Decoding, ImagePreprocessing
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.model import ModelSpec
from milebench.spec.model_execution import for_run

CLIP_MEAN_COLOUR = (122, 116, 104)
OFFICIAL_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content "
    "that the user provides, and assist the user with a variety of tasks using natural language."
)


def tiny_llava(variant: str = PAPER) -> ModelSpec:
    """The smoke run's tiny LLaVA (the official LLaVA path), or one of its variants."""
    specs = load_specs()
    run = specs.run("smoke").model_copy(update={"execution": {"tiny-llava": variant}})
    return for_run(specs.models["tiny-llava"], run)


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> RunPaths:
    root = tmp_path_factory.mktemp("run")
    run_paths = RunPaths(out=root, reports=root / "reports")
    build_tiny(tiny_llava(), run_paths.model_dir("tiny-llava"))
    write_pictures(run_paths, [(40, 24), (32, 32), (20, 50)])
    return run_paths


def generate_calls(adapter: HfLlavaAdapter, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows of every ``generate`` call the adapter's model makes from now on."""
    calls: list[int] = []
    real = adapter.model.generate

    def counted(**kwargs: Any) -> Any:
        calls.append(int(kwargs["input_ids"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(adapter.model, "generate", counted)
    return calls


def test_llava_llama_2_is_the_official_conversation_text() -> None:
    assert llava_llama_2("Look.\n<image>\nWhich?") == (
        f"[INST] <<SYS>>\n{OFFICIAL_SYSTEM}\n<</SYS>>\n\nLook.\n<image>\nWhich? [/INST]"
    )


def test_tiny_llava_renders_the_official_prompt(paths: RunPaths) -> None:
    adapter = load_adapter(tiny_llava(), paths, paths.data_root)
    sample = picture_sample(0, 2).model_copy(update={"context": "<ImageHere><ImageHere>which is red?"})
    assert adapter.render(sample) == (
        f"[INST] <<SYS>>\n{OFFICIAL_SYSTEM}\n<</SYS>>\n\nAnswer.\n<image>\n<image>\nwhich is red? [/INST]"
    )


def test_pad_to_square_centres_on_the_processor_mean_colour() -> None:
    assert mean_colour(CLIPImageProcessor()) == CLIP_MEAN_COLOUR
    red, green = (255, 0, 0), (0, 255, 0)
    wide = expand_to_square(Image.new("RGB", (5, 2), red), CLIP_MEAN_COLOUR)
    assert wide.size == (5, 5)
    rows = [[wide.getpixel((x, y)) for x in range(5)] for y in range(5)]
    assert rows == [[CLIP_MEAN_COLOUR] * 5] + [[red] * 5] * 2 + [[CLIP_MEAN_COLOUR] * 5] * 2
    tall = expand_to_square(Image.new("RGB", (1, 3), green), CLIP_MEAN_COLOUR)
    assert [tall.getpixel((x, 1)) for x in range(3)] == [CLIP_MEAN_COLOUR, green, CLIP_MEAN_COLOUR]
    square = Image.new("RGB", (4, 4), red)
    assert expand_to_square(square, CLIP_MEAN_COLOUR) is square


def test_preprocessing_reports_each_step() -> None:
    pictures = [Image.new("RGB", (6, 2)), Image.new("RGB", (3, 3))]
    _, padded = preprocess(pictures, ImagePreprocessing.PAD_TO_SQUARE, CLIPImageProcessor())
    assert [(s.original, s.padding, s.padded) for s in padded] == [
        ((6, 2), CLIP_MEAN_COLOUR, (6, 6)),
        ((3, 3), None, (3, 3)),
    ]
    kept, plain = preprocess(pictures, ImagePreprocessing.PROCESSOR, CLIPImageProcessor())
    assert kept == pictures and [s.padding for s in plain] == [None, None]


def sentencepiece_like() -> PreTrainedTokenizerFast:
    """A word-level tokenizer that marks word starts as SentencePiece does (``▁``, only at the start of
    the text) and adds BOS, like Llama's."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "<image>": 3, "▁Look": 4, "▁here": 5, "now": 6, "▁now": 7}
    model = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    model.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=model, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    return tokenizer


def test_chunks_are_tokenized_apart_and_joined_by_image_ids() -> None:
    tokenizer = sentencepiece_like()
    text = "Look here<image>now"
    assert tokenizer(text).input_ids == [1, 4, 5, 3, 6], "whole string: no word start after the image"
    assert per_chunk_ids(text, tokenizer, "<image>", [-200]) == [1, 4, 5, -200, 7]
    assert per_chunk_ids(text, tokenizer, "<image>", [3, 3]) == [1, 4, 5, 3, 3, 7]
    assert per_chunk_ids("<image>now", tokenizer, "<image>", [-200]) == [1, -200, 7]


def test_chunks_without_bos_lose_nothing(paths: RunPaths) -> None:
    tokenizer = load_adapter(tiny_llava(), paths, paths.data_root).processor.tokenizer
    first, second = tokenizer("A ").input_ids, tokenizer(" b").input_ids
    assert per_chunk_ids("A <image> b", tokenizer, "<image>", [9]) == [*first, 9, *second]


def test_per_sample_decoding_answers_each_sample_alone(
    paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = load_adapter(tiny_llava(), paths, paths.data_root)
    assert isinstance(adapter, HfLlavaAdapter)
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    alone = [adapter.generate([s])[0] for s in batch]
    calls = generate_calls(adapter, monkeypatch)
    assert adapter.generate(batch) == alone
    assert calls == [1, 1], "one unpadded generate per sample"
    assert all(u.seconds is not None for u in adapter.last_usage())


def test_batched_variant_generates_the_batch_at_once(
    paths: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = load_adapter(tiny_llava("batched"), paths, paths.data_root)
    assert isinstance(adapter, HfLlavaAdapter)
    batch = [picture_sample(0, 1), picture_sample(1, 3)]
    inputs = adapter.encode(batch)
    assert inputs["attention_mask"][0, 0] == 0, "the shorter prompt is padded on the left"
    calls = generate_calls(adapter, monkeypatch)
    assert len(adapter.generate(batch)) == 2
    assert calls == [2]


def test_stop_window_is_measured_against_the_official_prompt(paths: RunPaths) -> None:
    """``<s>`` spelt as plain characters is seen only when the decoded tail covers it. With the output
    (BOS included) of n ids and the prompt of p, the tail starts at p - n while n <= p, and is the last
    id once n > p."""
    tokenizer = load_adapter(tiny_llava(), paths, paths.data_root).processor.tokenizer
    spelt = torch.tensor([tokenizer.convert_tokens_to_ids(["<", "s", ">"])])
    assert tokenizer.decode(spelt[0]) == "<s>"

    def stops(official_prompt_len: int) -> bool:
        stop = KeywordStop(["<s>"], tokenizer, 0, official_prompt_len, [tokenizer.bos_token_id])
        return bool(stop(spelt, torch.zeros(1)))

    assert [stops(p) for p in (3, 4, 5, 6)] == [False, True, True, False]
    bos_last = torch.tensor([[5, tokenizer.bos_token_id]])
    assert bool(KeywordStop(["<s>"], tokenizer, 0, 100, [tokenizer.bos_token_id])(bos_last, torch.zeros(1)))


def test_added_token_ids_are_never_generated(paths: RunPaths, tmp_path: Path) -> None:
    """A conversion's extra output rows (made to win here) stay unused with original_vocab_only."""
    converted = RunPaths(out=tmp_path, reports=tmp_path)
    folder = converted.model_dir("tiny-llava")
    shutil.copytree(paths.model_dir("tiny-llava"), folder)
    model = LlavaForConditionalGeneration.from_pretrained(folder)
    base = model.config.text_config.vocab_size
    model.resize_token_embeddings(base + 48)
    with torch.no_grad():
        model.lm_head.weight[base:] = model.lm_head.weight[:base].abs().max() * 50
    model.save_pretrained(folder)

    def new_ids(original_vocab_only: bool) -> list[int]:
        spec = tiny_llava()
        execution = spec.execution.model_copy(update={"original_vocab_only": original_vocab_only})
        adapter = load_adapter(spec.model_copy(update={"execution": execution}), converted, paths.data_root)
        (row,) = adapter.split_rows(adapter.encode([picture_sample(0, 1)]))
        return adapter.new_tokens(row, None)[0].tolist()

    assert max(new_ids(False)) >= base
    assert max(new_ids(True)) < base


def test_a_run_selects_a_variant_by_name_and_it_is_recorded() -> None:
    paper, batched = tiny_llava(), tiny_llava("batched")
    assert (paper.execution.decoding, paper.execution.label) == (Decoding.PER_SAMPLE, PAPER)
    assert (batched.execution.decoding, batched.execution.label) == (Decoding.BATCHED, "batched")
    assert batched.execution.prompt_template == paper.execution.prompt_template
    sample = picture_sample(0, 1)
    assert cache_key(paper, sample, "v") != cache_key(batched, sample, "v")
    assert cache_key(paper, sample, "v") == cache_key(tiny_llava(), sample, "v")
    specs = load_specs()
    record = job_provenance(
        stage="infer",
        specs=specs,
        run=specs.run("smoke"),
        model=batched,
        task="ALFRED",
        mode="multi-image",
        outputs=(),
        fetch_manifest=Path("absent"),
        started_at=datetime.now(UTC),
    )
    assert record.execution is not None and record.execution.applied_variant == "batched"
    run = specs.run("smoke").model_copy(update={"execution": {"tiny-llava": "batched"}})
    (as_run,) = [m for m in specs.run_models(run) if m.name == "tiny-llava"]
    assert as_run == batched, "the workflow sees the variant too (its job parameters change with it)"


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    root = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, root)
    return root


def edited(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def spec_error(root: Path) -> str:
    with pytest.raises(SpecError) as err:
        check(argparse.Namespace(specs=root))
    return str(err.value)


def test_unknown_variants_are_spec_errors(specs_dir: Path) -> None:
    run = specs_dir / "runs" / "smoke.yaml"
    edited(run, lambda d: d.update(execution={"tiny-llava": "fastest"}))
    assert (
        f"{run}: execution.tiny-llava: model 'tiny-llava' has no execution variant 'fastest'"
        in spec_error(specs_dir)
    )
    edited(run, lambda d: d.update(execution={"llava-1.5-7b": "batched"}))
    assert f"{run}: execution.llava-1.5-7b: model 'llava-1.5-7b' is not in this run" in spec_error(specs_dir)


def test_a_variant_with_a_bad_choice_is_a_spec_error(specs_dir: Path) -> None:
    model = specs_dir / "models" / "llava-1.5-7b.yaml"
    edited(model, lambda d: d["execution"]["variants"]["batched"].update(decoding="sideways"))
    assert f"{model}: execution.variants.batched.decoding:" in spec_error(specs_dir)


def test_an_adapter_refuses_choices_it_cannot_carry_out(paths: RunPaths) -> None:
    spec = tiny_llava().model_copy(update={"adapter": "hf-llava-next"})
    with pytest.raises(AdapterError, match=r"hf-llava-next cannot run .*decoding: per_sample"):
        load_adapter(spec, paths, paths.data_root)


def test_the_paper_run_uses_the_official_choices_for_llava_15() -> None:
    specs = load_specs()
    for name in ("llava-1.5-7b", "llava-1.5-13b"):
        execution = for_run(specs.models[name], specs.run("paper")).execution
        assert execution is not None and execution.label == PAPER
        assert execution.model_dump(include={"prompt_template", "image_preprocessing", "decoding"}) == {
            "prompt_template": "llava_llama_2",
            "image_preprocessing": "pad_to_square",
            "decoding": "per_sample",
        }
        assert execution.stop_strings == ("<s>",)


def test_yi_and_mantis_turns_are_their_originals_conversation_texts() -> None:
    yi_system = (
        "This is a chat between an inquisitive human and an AI assistant. Assume the role of the AI "
        "assistant. Read all the images carefully, and respond to the human's questions with informative, "
        "helpful, detailed and polite answers. 这是一个好奇的人类和一个人工智能助手之间的对话。"
        "假设你扮演这个AI助手的角色。仔细阅读所有的图像，并对人类的问题做出信息丰富、有帮助、详细的和礼貌的回答。"  # noqa: RUF001
    )
    assert yi_mm_default("Look.\n<image_placeholder>\nWhich?") == (
        f"{yi_system}\n\n### Human: Look.\n<image_placeholder>\nWhich?\n### Assistant:"
    )
    assert mllava_v1("<image><image> Which one?") == (
        "A chat between a curious human and an artificial intelligence assistant. The assistant gives "
        "helpful, detailed, and polite answers to the human's questions.</s>USER: "
        "(image 1: <Image><image></Image>)(image 2: <Image><image></Image>) Which one?</s>ASSISTANT:"
    )


def test_yi_stop_rule_waits_for_a_second_token_and_needs_every_keyword() -> None:
    """Yi-VL's KeywordsStoppingCriteria: measured from the prompt's end, never done at the first new
    token, then done when the new text holds every keyword."""
    tokenizer = build_tokenizer()
    a, b = (tokenizer.convert_tokens_to_ids(t) for t in ("a", "b"))

    def done(keywords: list[str], prompt: list[int], new: list[int]) -> bool:
        stop = NewTextStop(keywords, tokenizer, len(prompt))
        return bool(stop(torch.tensor([prompt + new]), torch.zeros(1)))

    assert not done(["a"], [b], [a]), "the keyword is there, but only one token is new"
    assert done(["a"], [b], [a, b])
    assert not done(["a"], [a, a], [b, b]), "the prompt's text does not count"
    assert not done(["a", "c"], [], [a, b]) and done(["a", "b"], [], [a, b])


def test_the_paper_run_uses_the_originals_choices_for_yi_vl_and_mantis() -> None:
    specs = load_specs()
    chosen = {
        name: for_run(specs.models[name], specs.run("paper")).execution.model_dump(  # type: ignore[union-attr]
            include={"prompt_template", "image_preprocessing", "tokenization", "decoding", "stop_strings"},
            mode="json",
        )
        for name in ("yi-vl", "mantis")
    }
    assert chosen == {
        "yi-vl": {
            "prompt_template": "yi_mm_default",
            "image_preprocessing": "pad_to_square",
            "tokenization": "per_chunk",
            "decoding": "per_sample",
            "stop_strings": ["###"],
        },
        "mantis": {
            "prompt_template": "mllava_v1",
            "image_preprocessing": "processor",
            "tokenization": "whole",
            "decoding": "per_sample",
            "stop_strings": [],
        },
    }
    assert {specs.models[n].adapter for n in chosen} == {"hf-yi-vl", "hf-mantis"}


def test_each_image_counts_its_features_against_the_window(paths: RunPaths) -> None:
    """Where the processor leaves one id per image (transformers 4.37: the model expands it), the
    window still counts the image's n_tokens_per_image positions, as where the processor expands it."""
    adapter = load_adapter(tiny_llava(), paths, paths.data_root)
    assert isinstance(adapter, HfLlavaAdapter)
    sample = picture_sample(0, 2)
    expanded = adapter.input_lengths(adapter.encode([sample]))
    per_image = adapter.spec.n_tokens_per_image
    assert per_image is not None and adapter.image_seq == per_image
    adapter.__dict__["image_seq"] = 1  # a processor that does not expand image tokens
    collapsed = adapter.encode([sample])
    assert int(collapsed["attention_mask"].sum()) == expanded[0] - 2 * (per_image - 1)
    assert adapter.input_lengths(collapsed) == expanded
