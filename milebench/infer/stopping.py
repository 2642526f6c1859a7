"""Stop strings with the semantics of LLaVA's ``KeywordsStoppingCriteria``, as the official worker uses it.

The official worker generates from input embeddings under transformers 4.37, whose ``generate`` then
starts the output with the BOS id instead of the prompt; so its criterion sees ``[BOS] + new tokens``
and measures them against the length of its prompt ids (one id per image). It stops when those ids
end with a keyword's ids (the keyword tokenized with special tokens, a leading BOS dropped), or when a
decoded tail holds the keyword; the tail is ``ids[-min(len(ids) - prompt_len, k):]`` with ``k`` the
longest keyword's id count, which while ``len(ids)`` is below ``prompt_len`` starts late or is empty.
All of this is reproduced, not corrected. The keyword is not cut from the answer.

Yi-VL's own ``KeywordsStoppingCriteria`` (github.com/01-ai/Yi, ``VL/llava/mm_utils.py``) is another rule,
:class:`NewTextStop`: its model generates from the prompt ids themselves, so the criterion measures from
the prompt's end; it never stops at the first new token, and afterwards stops once the new tokens,
decoded without special tokens, hold every keyword.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from transformers import StoppingCriteria


def without_stop_keyword(text: str, keywords: Sequence[str]) -> str:
    """An answer as LLaVA-style evaluations clean it: stripped, a trailing stop keyword cut, stripped."""
    answer = text.strip()
    for keyword in keywords:
        if answer.endswith(keyword):
            answer = answer[: -len(keyword)]
    return answer.strip()


def keyword_ids(keyword: str, tokenizer: Any) -> list[int]:
    ids = list(tokenizer(keyword).input_ids)
    if len(ids) > 1 and ids[0] == tokenizer.bos_token_id:
        ids = ids[1:]
    return ids


class RowStop(StoppingCriteria):
    """A stop rule judged on each row's new tokens (everything after ``prompt_len``, the input length passed
    to ``generate``); generation stops when every row is done, as the originals judge a batch (their
    batches have one row). A scalar answer works with every transformers version."""

    def __init__(self, keywords: Sequence[str], tokenizer: Any, prompt_len: int) -> None:
        self.keywords = list(keywords)
        self.tokenizer = tokenizer
        self.prompt_len = prompt_len

    def row_done(self, new: torch.Tensor) -> bool:
        """``new``: one row's new tokens, shape (1, n)."""
        raise NotImplementedError

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        new = input_ids[:, self.prompt_len :]
        done = all(self.row_done(new[i : i + 1]) for i in range(new.shape[0]))
        return cast(torch.BoolTensor, torch.tensor(done, dtype=torch.bool, device=input_ids.device))


class KeywordStop(RowStop):
    """LLaVA's criterion as the official worker meets it: ``official_prompt_len`` is the prompt's length in
    the official worker's ids and ``official_prefix`` what its output holds before the new tokens."""

    def __init__(
        self,
        keywords: Sequence[str],
        tokenizer: Any,
        prompt_len: int,
        official_prompt_len: int,
        official_prefix: Sequence[int],
    ):
        super().__init__(keywords, tokenizer, prompt_len)
        self.ids = [torch.tensor(keyword_ids(k, tokenizer)) for k in self.keywords]
        self.longest = max((len(ids) for ids in self.ids), default=0)
        self.official_prompt_len = official_prompt_len
        self.prefix = torch.tensor([list(official_prefix)], dtype=torch.long)

    def row_done(self, new: torch.Tensor) -> bool:
        seen = torch.cat([self.prefix.to(new.device), new], dim=1)
        for ids in self.ids:
            if torch.equal(seen[0, -ids.shape[0] :], ids.to(new.device)):
                return True
        offset = min(seen.shape[1] - self.official_prompt_len, self.longest)
        tail = self.tokenizer.batch_decode(seen[:, -offset:], skip_special_tokens=True)[0]
        return any(keyword in tail for keyword in self.keywords)


class NewTextStop(RowStop):
    """Yi-VL's criterion: the first call only notes where the prompt ends; from the second new token on,
    done when the new tokens' text (special tokens skipped) holds every keyword."""

    def row_done(self, new: torch.Tensor) -> bool:
        if new.shape[1] < 2:
            return False
        text = self.tokenizer.batch_decode(new, skip_special_tokens=True)[0]
        return all(keyword in text for keyword in self.keywords)


class RecentTextStop(RowStop):
    """LLaVA 1.1's criterion (llava-torch 1.1.1, which LLaMA-VID's evaluation imports): done when the new
    tokens end with a keyword's ids, or when the text of the last three new tokens (fewer at first,
    special tokens skipped) holds a keyword."""

    WINDOW = 3

    def __init__(self, keywords: Sequence[str], tokenizer: Any, prompt_len: int) -> None:
        super().__init__(keywords, tokenizer, prompt_len)
        self.ids = [torch.tensor(keyword_ids(k, tokenizer)) for k in self.keywords]

    def row_done(self, new: torch.Tensor) -> bool:
        for ids in self.ids:
            if torch.equal(new[0, -ids.shape[0] :], ids.to(new.device)):
                return True
        tail = self.tokenizer.batch_decode(
            new[:, -min(new.shape[1], self.WINDOW) :], skip_special_tokens=True
        )[0]
        return any(keyword in tail for keyword in self.keywords)
