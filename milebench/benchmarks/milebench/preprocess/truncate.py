"""Fit a prompt to a model's context the way the official ``MileBenchDataset`` does, and account for it.

The context is split at image placeholders and walked from the end (reference section 3): a text piece is
kept if its tokens fit the budget left after the instruction; if the very last piece alone does not fit,
only its last ``budget`` tokens are kept; after each kept piece the image before it is kept if
``n_tokens_per_image`` more tokens fit (the walk stops otherwise, even when no image is left to add, as the
official loop does). Without a budget the same walk only pairs images with placeholders, so the kept
images are the last ``min(n_images, n_pieces)`` and an extra placeholder leads when the first piece got
one.

``paper`` mode rebuilds every kept piece by decoding its token ids (spacing may change, and a budget of
zero or less slices the ids as Python does: ``ids[-0:]`` keeps them all). ``clean`` mode keeps the original
text and cuts the earliest kept piece at the start offset of its first kept token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from milebench.benchmarks.milebench.records import TruncationRecord
from milebench.benchmarks.milebench.spec.run import TruncationMode
from milebench.infer.records import IMAGE_PLACEHOLDER
from milebench.preprocess.tokenizer import Tokenizer


@dataclass(frozen=True)
class Budget:
    """A model's context settings; ``n_tokens_per_image`` is ignored when images are not interleaved."""

    max_context_len: int
    n_tokens_per_image: int
    tokenizer: Tokenizer
    mode: TruncationMode


@dataclass(frozen=True)
class Fitted:
    """The context as the model sees it, the images paired with its placeholders, and the account."""

    context: str
    images: tuple[str, ...]
    record: TruncationRecord


def _cut(piece: str, ids: list[int], room: int, budget: Budget) -> tuple[str, int]:
    """The end of an over-long piece (``room`` is below its token count): (text, tokens kept)."""
    if budget.mode is TruncationMode.PAPER:
        kept = ids[-room:]
        return budget.tokenizer.decode(kept), len(kept)
    keep = max(room, 0)
    if keep == 0:
        return "", 0
    return piece[budget.tokenizer.offsets(piece)[len(ids) - keep][0] :], keep


def fit_context(
    instruction: str, context: str, images: Sequence[str], budget: Budget | None, pair_images: bool
) -> Fitted:
    """Walk ``context`` from the end under ``budget`` (None: unlimited); ``pair_images`` is False in
    combined-image mode, where the pictures are not part of the context and cost no tokens."""
    pieces = context.split(IMAGE_PLACEHOLDER)
    remaining = list(images) if pair_images else []
    instruction_ids: list[int] = []
    piece_ids: list[list[int]] = [[] for _ in pieces]
    room = per_image = 0
    if budget is not None:
        instruction_ids, *piece_ids = budget.tokenizer.encode([instruction, *pieces])
        room = budget.max_context_len - len(instruction_ids)
        per_image = budget.n_tokens_per_image if pair_images else 0
    kept_text: list[str] = []
    kept_images: list[str] = []
    used = text_kept = changed = 0
    image_start = cut = False
    for index in reversed(range(len(pieces))):
        piece = pieces[index]
        if budget is None:
            text, n = piece, 0
        else:
            ids = piece_ids[index]
            n = len(ids)
            if n + used > room:
                if not kept_text:
                    text, text_kept = _cut(piece, ids, room, budget)
                    kept_text.append(text)
                    cut = text_kept < n
                    changed += not piece.endswith(text)
                break
            text = budget.tokenizer.decode(ids) if budget.mode is TruncationMode.PAPER else piece
            changed += text != piece
        image_start = False
        kept_text.append(text)
        used += n
        text_kept += n
        if not pair_images:
            continue
        if budget is not None and per_image + used > room:
            break
        if remaining:
            image_start = True
            kept_images.insert(0, remaining.pop())
            used += per_image
    fitted = IMAGE_PLACEHOLDER.join(reversed(kept_text))
    if image_start:
        fitted = IMAGE_PLACEHOLDER + fitted
    slots = min(len(images), len(pieces)) if pair_images else len(images)
    record = TruncationRecord(
        mode=None if budget is None else budget.mode,
        max_context_len=None if budget is None else budget.max_context_len,
        n_tokens_per_image=None if budget is None else per_image,
        images_total=len(images),
        images_kept=len(kept_images) if pair_images else len(images),
        images_dropped_budget=slots - len(kept_images) if pair_images else 0,
        images_unpaired=len(images) - slots,
        pieces_total=len(pieces),
        pieces_kept=len(kept_text),
        piece_cut=cut,
        pieces_changed=changed,
        instruction_tokens=None if budget is None else len(instruction_ids),
        text_tokens_total=None if budget is None else sum(len(i) for i in piece_ids),
        text_tokens_kept=None if budget is None else text_kept,
        image_tokens_kept=None if budget is None else len(kept_images) * per_image,
    )
    return Fitted(fitted, tuple(kept_images) if pair_images else tuple(images), record)
