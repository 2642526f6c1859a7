"""OpenFlamingo's model as its original code loads it (github.com/mlfoundations/open_flamingo, the
``open-flamingo`` 2.0.1 release on PyPI): ``create_model_and_transforms`` builds the open_clip vision
encoder, the language model and the tokenizer (with ``<|endofchunk|>``, ``<image>`` and ``<PAD>`` added),
then the checkpoint's state dict is loaded over it with ``strict=False``, as its README and
``eval/models/open_flamingo.py`` do.

The released checkpoints hold no description of themselves (a hub repo has only ``checkpoint.pt``): the
arguments of each release are the README's table (:data:`RELEASES`). A kit-built checkpoint carries them
in ``open_flamingo.json`` (:class:`FlamingoLayout`), with an open_clip model config of its own that is
registered before the build, so both go through :func:`load_flamingo`.
"""

from __future__ import annotations

import contextlib
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import Field, ValidationError

from milebench.infer.adapter import AdapterError
from milebench.spec.base import Spec, describe_errors

log = logging.getLogger(__name__)

LAYOUT_FILE = "open_flamingo.json"
"""Where a kit-built checkpoint states its ``create_model_and_transforms`` arguments."""
CHECKPOINT_FILE = "checkpoint.pt"
"""The state dict's file name, in the released hub repos and in a kit-built folder."""
IMAGE_FAMILY = "open-flamingo"
"""The container family that holds the original code (containers/open-flamingo)."""
TRAINED_PARTS = ("perceiver.", "lang_encoder.gated_cross_attn_layers.")
"""What every OpenFlamingo checkpoint must hold: the parts its training adds to the two frozen models."""


class FlamingoLayout(Spec):
    """``create_model_and_transforms``' arguments for one checkpoint; paths relative to its folder."""

    clip_vision_encoder_path: str = Field(description="open_clip model name (e.g. ViT-L-14).")
    clip_vision_encoder_pretrained: str | None = Field(
        description="open_clip pretrained tag (e.g. openai); null: random, the checkpoint holds the encoder."
    )
    lang_encoder_path: str
    tokenizer_path: str
    cross_attn_every_n_layers: int = Field(ge=1)
    open_clip_config: str | None = Field(
        default=None, description="An open_clip model config file to register first (kit-built models)."
    )


RELEASES: dict[str, FlamingoLayout] = {
    "openflamingo/OpenFlamingo-9B-vitl-mpt7b": FlamingoLayout(
        clip_vision_encoder_path="ViT-L-14",
        clip_vision_encoder_pretrained="openai",
        lang_encoder_path="anas-awadalla/mpt-7b",
        tokenizer_path="anas-awadalla/mpt-7b",
        cross_attn_every_n_layers=4,
    ),
}
"""The hub releases the kit runs, with the arguments OpenFlamingo's README table gives them."""


@dataclass(frozen=True)
class FlamingoParts:
    """What ``create_model_and_transforms`` returns, with the checkpoint loaded into the model."""

    model: Any
    image_processor: Any
    tokenizer: Any


def original_code(spec_name: str) -> Any:
    """The ``open_flamingo`` package; its absence is one error saying where it is installed."""
    try:
        import open_clip
        import open_flamingo
    except ImportError as err:
        raise AdapterError(
            f"model spec {spec_name!r}: OpenFlamingo's original code cannot be imported ({err}); run the "
            f"model in its image (`milebench image build --family {IMAGE_FAMILY}`, deployment docker) or "
            "install it beside the kit: `bash .ci/open-flamingo-kit.sh`"
        ) from None
    return open_flamingo, open_clip


def read_layout(folder: Path, spec_name: str) -> FlamingoLayout:
    """The layout a kit-built checkpoint states, checked; a missing or bad file names itself."""
    path = folder / LAYOUT_FILE
    fix = f"run `milebench tiny-model --model {spec_name}`"
    if not path.is_file():
        raise AdapterError(f"model spec {spec_name!r}: {path} not found; {fix}")
    try:
        return FlamingoLayout.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as err:
        raise AdapterError(f"model spec {spec_name!r}: {path}: {describe_errors(err)}; {fix}") from None


def release_layout(repo_id: str, spec_name: str) -> FlamingoLayout:
    """The README's arguments for a released checkpoint; another repo is refused by name."""
    if repo_id not in RELEASES:
        raise AdapterError(
            f"model spec {spec_name!r}: weights.repo_id {repo_id!r} is no OpenFlamingo release the kit "
            f"knows the arguments of (known: {', '.join(sorted(RELEASES))})"
        )
    return RELEASES[repo_id]


def resolved(layout: FlamingoLayout, folder: Path | None) -> FlamingoLayout:
    """The layout with its local paths made absolute (a hub release names hub repos: left as they are)."""
    if folder is None:
        return layout
    config = None if layout.open_clip_config is None else str(folder / layout.open_clip_config)
    return layout.model_copy(
        update={
            "lang_encoder_path": str(folder / layout.lang_encoder_path),
            "tokenizer_path": str(folder / layout.tokenizer_path),
            "open_clip_config": config,
        }
    )


def build_flamingo(layout: FlamingoLayout, spec_name: str) -> FlamingoParts:
    """What the original ``create_model_and_transforms`` builds from ``layout`` (new weights drawn from
    torch's generator, pretrained parts downloaded by the original code where the layout names them)."""
    open_flamingo, open_clip = original_code(spec_name)
    if layout.open_clip_config is not None:
        open_clip.add_model_config(layout.open_clip_config)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the factory prints its trainable parameter count
        model, image_processor, tokenizer = open_flamingo.create_model_and_transforms(
            clip_vision_encoder_path=layout.clip_vision_encoder_path,
            clip_vision_encoder_pretrained=layout.clip_vision_encoder_pretrained,
            lang_encoder_path=layout.lang_encoder_path,
            tokenizer_path=layout.tokenizer_path,
            cross_attn_every_n_layers=layout.cross_attn_every_n_layers,
        )
    log.debug("create_model_and_transforms: %s", printed.getvalue().strip())
    return FlamingoParts(model=model, image_processor=image_processor, tokenizer=tokenizer)


def load_flamingo(layout: FlamingoLayout, checkpoint: Path, spec_name: str) -> FlamingoParts:
    """The original build with the checkpoint loaded over it (``strict=False``); a checkpoint that does not
    fit the architecture is one error naming the file."""
    if not checkpoint.is_file():
        raise AdapterError(
            f"model spec {spec_name!r}: the checkpoint {checkpoint} is missing; "
            f"run `milebench tiny-model --model {spec_name}` (kit-built) or fetch the release's "
            f"{CHECKPOINT_FILE} into the hub cache"
        )
    parts = build_flamingo(layout, spec_name)
    model = parts.model
    state = torch.load(checkpoint, map_location="cpu")
    if "model_state_dict" in state:
        state = {k.replace("module.", ""): v for k, v in state["model_state_dict"].items()}
    try:
        loaded = model.load_state_dict(state, strict=False)
    except RuntimeError as err:  # a tensor of another shape
        raise misfit(spec_name, checkpoint, layout, str(err).splitlines()[-1].strip()) from None
    untrained = sorted({k.split(".")[0] for k in loaded.missing_keys if k.startswith(TRAINED_PARTS)})
    if loaded.unexpected_keys or untrained:
        unexpected = sorted(loaded.unexpected_keys)[:5]
        raise misfit(spec_name, checkpoint, layout, f"unexpected keys {unexpected}, missing {untrained}")
    return parts


def misfit(spec_name: str, checkpoint: Path, layout: FlamingoLayout, why: str) -> AdapterError:
    return AdapterError(
        f"model spec {spec_name!r}: {checkpoint} does not fit the model built from {layout.model_dump()}: "
        f"{why}; rebuild a kit-built one with `milebench tiny-model --model {spec_name}`"
    )
