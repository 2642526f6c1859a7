"""Stop strings with the semantics of LLaVA's ``KeywordsStoppingCriteria``, as the official worker uses it.

The official worker generates from input embeddings under transformers 4.37, whose ``generate`` then
starts the output with the BOS id instead of the prompt; so its criterion sees ``[BOS] + new tokens``
and measures them against the length of its prompt ids (one id per image). It stops when those ids
end with a keyword's ids (the keyword tokenized with special tokens, a leading BOS dropped), or when a
decoded tail holds the keyword; the tail is ``ids[-min(len(ids) - prompt_len, k):]`` with ``k`` the
longest keyword's id count, which while ``len(ids)`` is below ``prompt_len`` starts late or is empty.
All of this is reproduced, not corrected. The keyword is not cut from the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from transformers import StoppingCriteria


def keyword_ids(keyword: str, tokenizer: Any) -> list[int]:
    ids = list(tokenizer(keyword).input_ids)
    if len(ids) > 1 and ids[0] == tokenizer.bos_token_id:
        ids = ids[1:]
    return ids


class KeywordStop(StoppingCriteria):
    """Stops when every row holds a keyword, as the official criterion judges a batch (the official
    worker's batches have one row). A scalar answer works with every transformers version.

    ``prompt_len`` is the input length passed to ``generate`` (everything before it is prompt);
    ``official_prompt_len`` is the prompt's length in the official worker's ids and ``official_prefix``
    what its output holds before the new tokens.
    """

    def __init__(
        self,
        keywords: Sequence[str],
        tokenizer: Any,
        prompt_len: int,
        official_prompt_len: int,
        official_prefix: Sequence[int],
    ):
        self.keywords = list(keywords)
        self.tokenizer = tokenizer
        self.ids = [torch.tensor(keyword_ids(k, tokenizer)) for k in self.keywords]
        self.longest = max((len(ids) for ids in self.ids), default=0)
        self.prompt_len = prompt_len
        self.official_prompt_len = official_prompt_len
        self.prefix = torch.tensor([list(official_prefix)], dtype=torch.long)

    def row_done(self, new: torch.Tensor) -> bool:
        """``new``: one row's new tokens, shape (1, n)."""
        seen = torch.cat([self.prefix.to(new.device), new], dim=1)
        for ids in self.ids:
            if torch.equal(seen[0, -ids.shape[0] :], ids.to(new.device)):
                return True
        offset = min(seen.shape[1] - self.official_prompt_len, self.longest)
        tail = self.tokenizer.batch_decode(seen[:, -offset:], skip_special_tokens=True)[0]
        return any(keyword in tail for keyword in self.keywords)

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any
    ) -> torch.BoolTensor:
        new = input_ids[:, self.prompt_len :]
        done = all(self.row_done(new[i : i + 1]) for i in range(new.shape[0]))
        return cast(torch.BoolTensor, torch.tensor(done, dtype=torch.bool, device=input_ids.device))
