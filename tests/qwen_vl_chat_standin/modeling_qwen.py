"""A tiny GRU language model with Qwen-VL-Chat's remote-code interface: ``chat`` over a chatml turn and
``generation_config`` (chat_format, max_window_size). Each image span of the input is replaced by the
features of the picture whose path the span holds, opened from disk, so a wrong path fails here as it
does in the real model's visual module. The running mean of the inputs joins the GRU state, so pictures
far back still change the answer."""

import numpy as np
import torch
from PIL import Image
from torch import nn
from transformers import GenerationMixin, LogitsProcessor, LogitsProcessorList, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

from .configuration_qwen import QWenConfig


class Visual(nn.Module):
    """Picture -> one feature vector: the RGB values at a few pixels, projected."""

    def __init__(self, config: QWenConfig):
        super().__init__()
        self.pixels = config.image_pixels
        self.proj = nn.Linear(3 * self.pixels**2, config.hidden_size)

    def encode(self, paths: list[str]) -> torch.Tensor:
        rows = []
        for path in paths:
            with Image.open(path) as img:
                small = img.convert("RGB").resize((self.pixels, self.pixels))
            rows.append(torch.from_numpy(np.asarray(small, dtype=np.float32).reshape(-1) / 255.0))
        return self.proj(torch.stack(rows).to(self.proj.weight.device, self.proj.weight.dtype))


class StopWords(LogitsProcessor):
    """After a stop word only end-of-text may follow, so generation ends there."""

    def __init__(self, stop_ids: list[int], eos_id: int):
        self.stop_ids = torch.tensor(stop_ids)
        self.eos_id = eos_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        stopped = torch.isin(input_ids[:, -1], self.stop_ids.to(input_ids.device))
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.eos_id] = 0.0
        return torch.where(stopped[:, None], forced, scores)


class QWenLMHeadModel(PreTrainedModel, GenerationMixin):
    config_class = QWenConfig

    def __init__(self, config: QWenConfig):
        super().__init__(config)
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.visual = Visual(config)
        self.rnn = nn.GRU(config.hidden_size, config.hidden_size, batch_first=True)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()
        self.set_precision(config)

    def set_precision(self, config: QWenConfig) -> None:
        """QWenLMHeadModel's precision switch: the flag given, else bf16 where the GPU has it, fp16 on
        other GPUs, fp32 without one; the model converts itself to it."""
        if config.bf16 + config.fp16 + config.fp32 > 1:
            raise ValueError('Only one of "bf16", "fp16", "fp32" can be true')
        if config.bf16 + config.fp16 + config.fp32 == 0:
            if torch.cuda.is_available():
                config.bf16, config.fp16 = torch.cuda.is_bf16_supported(), not torch.cuda.is_bf16_supported()
            else:
                config.fp32 = True
        if config.bf16:
            self.bfloat16()
        if config.fp16:
            self.half()

    def _init_weights(self, module: nn.Module) -> None:
        """Wide weights, so greedy answers vary with the input."""
        for param in module.parameters(recurse=False):
            nn.init.normal_(param, std=1.0)

    def image_paths(self, row: list[int]) -> list[tuple[int, int, str]]:
        """(start, end, path) of each <img>...</img> span; the path is the bytes before the padding."""
        starts = [i for i, t in enumerate(row) if t == self.config.image_start_id]
        ends = [i for i, t in enumerate(row) if t == self.config.image_end_id]
        spans = []
        for start, end in zip(starts, ends, strict=True):
            path = bytes(t for t in row[start + 1 : end] if t < 256)
            spans.append((start, end, path.decode("utf-8")))
        return spans

    def forward(self, input_ids: torch.LongTensor, **kwargs) -> CausalLMOutput:
        embeds = self.embed(input_ids)
        for b, row in enumerate(input_ids.tolist()):
            spans = self.image_paths(row)
            if spans:
                features = self.visual.encode([path for _, _, path in spans])
                for (start, end, _), feature in zip(spans, features, strict=True):
                    embeds[b, start : end + 1] = feature
        hidden, _ = self.rnn(embeds)
        positions = torch.arange(1, embeds.shape[1] + 1, device=embeds.device)[None, :, None]
        running_mean = embeds.cumsum(dim=1) / positions
        return CausalLMOutput(logits=self.lm_head(hidden + running_mean))

    def prepare_inputs_for_generation(self, input_ids: torch.LongTensor, **kwargs) -> dict[str, torch.Tensor]:
        """The whole sequence each step (no cache); defining it is what makes the model one that can
        generate, so ``from_pretrained`` reads its generation_config.json, as it does for the real one."""
        return {"input_ids": input_ids}

    def chat(
        self,
        tokenizer,
        query: str,
        history: list[tuple[str, str]] | None = None,
        system: str = "You are a helpful assistant.",
        append_history: bool = True,
        generation_config=None,
        **kwargs,
    ) -> tuple[str, list[tuple[str, str]]]:
        """One chatml turn after ``history`` (kept whole); ``kwargs`` go to ``generate``."""
        generation_config = generation_config if generation_config is not None else self.generation_config
        if generation_config.chat_format != "chatml":
            raise ValueError("only the chatml chat format is supported")
        history = [] if history is None else history
        context = chatml_ids(tokenizer, query, history, system)
        input_ids = torch.tensor([context], device=self.device)
        stop = StopWords([tokenizer.im_end_id, tokenizer.im_start_id], tokenizer.eod_id)
        outputs = self.generate(
            input_ids,
            generation_config=generation_config,
            logits_processor=LogitsProcessorList([stop]),
            **kwargs,
        )
        answer = []
        for token in outputs[0, len(context) :].tolist():
            if token in (tokenizer.im_end_id, tokenizer.im_start_id, tokenizer.eod_id):
                break
            answer.append(token)
        response = tokenizer.decode(answer).strip()
        if append_history:
            history.append((query, response))
        return response, history


def chatml_ids(tokenizer, query: str, history: list[tuple[str, str]], system: str) -> list[int]:
    """``<|im_start|>role\\ncontent<|im_end|>\\n`` per turn, then the assistant's opening."""

    def turn(role: str, content: str) -> list[int]:
        text = f"<|im_start|>{role}\n{content}<|im_end|>\n"
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))

    ids = turn("system", system)
    for past_query, past_response in history:
        ids += turn("user", past_query) + turn("assistant", past_response)
    opening = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("<|im_start|>assistant\n"))
    return ids + turn("user", query) + opening
