"""Input regimes: the model settings that change a prepared prompt, so models that agree share one file.

A regime holds the context length, tokens per image, the tokenizer that counts, the truncation mode and
how images reach the model (interleaved or tiled). Its id is readable and ends in a hash of those
settings, so a change of any of them gives a new prepared file while unchanged regimes are not re-run.
Models without a usable budget (builtin baselines, unknown context settings, no tokenizer) fall into the
unlimited regime, whose id is :data:`milebench.benchmarks.milebench.paths.UNLIMITED_REGIME`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from milebench.benchmarks.milebench.paths import UNLIMITED_REGIME, RunPaths
from milebench.benchmarks.milebench.spec.registry import Specs
from milebench.benchmarks.milebench.spec.run import CombinedSource, Mode, RunSpec, TruncationMode
from milebench.io import canonical_json, sha256_text
from milebench.spec.base import Spec
from milebench.spec.model import HubWeights, ImageInput, ModelSpec, TinyWeights
from milebench.spec.weights_lock import locked_revision


class TokenizerSource(Spec):
    """Where the counting tokenizer loads from: a kit-built model folder or a hub repo; ``hub-remote-code``
    is a hub repo whose tokenizer is the repo's own code (the model spec trusts it)."""

    kind: Literal["model-dir", "hub", "hub-remote-code"]
    name: str = Field(description="Model spec name (model-dir) or hub repo id.")
    revision: str | None = None

    @property
    def trust_remote_code(self) -> bool:
        return self.kind == "hub-remote-code"


class Regime(Spec):
    """Everything about a model that changes its prepared prompts (the mode is part of the path)."""

    image_input: ImageInput
    max_context_len: int | None = None
    n_tokens_per_image: int | None = None
    tokenizer: TokenizerSource | None = None
    truncation: TruncationMode | None = None
    combined_pictures: int | None = None
    combined_source: CombinedSource | None = None

    @property
    def budgeted(self) -> bool:
        return self.truncation is not None

    @property
    def id(self) -> str:
        if self == UNLIMITED:
            return UNLIMITED_REGIME
        digest = sha256_text(canonical_json(self.model_dump(mode="json")))[:10]
        parts = [f"ctx{self.max_context_len}", str(self.truncation)] if self.budgeted else ["full"]
        if self.image_input is ImageInput.COMBINED:
            parts.append(f"combined{self.combined_pictures}")
        return "-".join([*parts, digest])

    @property
    def label(self) -> str:
        """The id in words for a reader (``context 2048, 576 tokens per image, paper truncation``); the id
        stays the name of its files, shown beside the label."""
        parts = []
        if self.budgeted:
            parts.append(f"context {self.max_context_len}")
            if self.n_tokens_per_image is not None:
                parts.append(plural(self.n_tokens_per_image, "token") + " per image")
            parts.append(f"{self.truncation} truncation")
        else:
            parts.append("no token budget")
        if self.image_input is ImageInput.COMBINED and self.combined_pictures is not None:
            made = {CombinedSource.UPSTREAM: "from the data", CombinedSource.KIT: "made by the kit"}
            source = f" {made[self.combined_source]}" if self.combined_source is not None else ""
            parts.append(plural(self.combined_pictures, "combined picture") + source)
        return ", ".join(parts)


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


UNLIMITED = Regime(image_input=ImageInput.INTERLEAVED)


def tokenizer_source(spec: ModelSpec, specs_root: Path) -> TokenizerSource | None:
    """The model's own tokenizer: its kit-built folder, the spec's ``tokenizer``, or its pinned hub repo
    (with the repo's own code when the spec trusts it)."""
    if isinstance(spec.weights, TinyWeights):
        return TokenizerSource(kind="model-dir", name=spec.name)
    if spec.tokenizer is not None:
        return TokenizerSource(kind="hub", name=spec.tokenizer)
    if isinstance(spec.weights, HubWeights):
        revision = spec.weights.revision or locked_revision(spec.name, specs_root)
        kind: Literal["hub", "hub-remote-code"] = (
            "hub-remote-code" if spec.weights.trust_remote_code else "hub"
        )
        return TokenizerSource(kind=kind, name=spec.weights.repo_id, revision=revision)
    return None


def regime_for(spec: ModelSpec, run: RunSpec, mode: Mode, specs_root: Path) -> Regime:
    """The regime a model reads its prompts from, in one mode of a run."""
    combined = mode is Mode.COMBINED_IMAGE or spec.image_input is ImageInput.COMBINED
    tokenizer = tokenizer_source(spec, specs_root)
    needs = [spec.max_context_len, tokenizer] + ([] if combined else [spec.n_tokens_per_image])
    budgeted = not spec.builtin and all(v is not None for v in needs)
    return Regime(
        image_input=ImageInput.COMBINED if combined else ImageInput.INTERLEAVED,
        max_context_len=spec.max_context_len if budgeted else None,
        n_tokens_per_image=spec.n_tokens_per_image if budgeted and not combined else None,
        tokenizer=tokenizer if budgeted else None,
        truncation=run.truncation if budgeted else None,
        combined_pictures=run.combined_pictures if combined else None,
        combined_source=run.combined_source if combined else None,
    )


def model_regime(specs: Specs, run: RunSpec, model: str, mode: Mode) -> Regime:
    return regime_for(specs.model(model), run, mode, specs.lock_root())


def run_regimes(specs: Specs, run: RunSpec, mode: Mode) -> dict[str, tuple[Regime, tuple[str, ...]]]:
    """Regime id -> (regime, the run's models that read it), in run order."""
    found: dict[str, tuple[Regime, tuple[str, ...]]] = {}
    for name in run.models:
        regime = model_regime(specs, run, name, mode)
        _, models = found.get(regime.id, (regime, ()))
        found[regime.id] = (regime, (*models, name))
    return found


def tokenizer_dirs(regime: Regime, paths: RunPaths) -> list[Path]:
    """Kit-built model folders a regime's preprocess job reads its tokenizer from (a DAG input)."""
    source = regime.tokenizer
    return [paths.model_dir(source.name)] if source is not None and source.kind == "model-dir" else []
