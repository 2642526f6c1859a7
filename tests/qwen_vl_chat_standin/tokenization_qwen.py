"""Byte-level tokenizer with Qwen-VL-Chat's interface: chatml and image tags, ``from_list_format``, and
image spans of a fixed token count holding the picture's path (which the model reads back)."""

import re
from typing import ClassVar

from transformers import PreTrainedTokenizer

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
IMG_START = "<img>"
IMG_END = "</img>"
IMG_PAD = "<imgpad>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, IMG_START, IMG_END, IMG_PAD)
IMG_TOKEN_SPAN = 256
"""Tokens between <img> and </img>: the path's bytes, then padding."""

SPECIAL_SPLIT = re.compile("(" + "|".join(map(re.escape, SPECIAL_TOKENS)) + ")")
IMAGE_SPAN = re.compile(f"{re.escape(IMG_START)}(.*?){re.escape(IMG_END)}", re.DOTALL)


class QWenTokenizer(PreTrainedTokenizer):
    vocab_files_names: ClassVar[dict[str, str]] = {}
    model_input_names: ClassVar[list[str]] = ["input_ids", "attention_mask"]

    def __init__(self, **kwargs):
        self.encoder: dict[bytes | str, int] = {bytes([i]): i for i in range(256)}
        self.encoder.update({token: 256 + i for i, token in enumerate(SPECIAL_TOKENS)})
        self.decoder = {i: token for token, i in self.encoder.items()}
        self.image_start_tag, self.image_end_tag, self.image_pad_tag = IMG_START, IMG_END, IMG_PAD
        self.eod_id = self.encoder[ENDOFTEXT]
        self.im_start_id = self.encoder[IM_START]
        self.im_end_id = self.encoder[IM_END]
        self.img_start_id = self.encoder[IMG_START]
        self.img_end_id = self.encoder[IMG_END]
        self.img_pad_id = self.encoder[IMG_PAD]
        super().__init__(**kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self.encoder)

    def get_vocab(self) -> dict:
        return dict(self.encoder)

    def _text_tokens(self, text: str) -> list:
        tokens: list = []
        for piece in SPECIAL_SPLIT.split(text):
            if piece in SPECIAL_TOKENS:
                tokens.append(piece)
            else:
                tokens.extend(bytes([b]) for b in piece.encode("utf-8"))
        return tokens

    def tokenize(self, text: str, **kwargs) -> list:
        """Bytes and special tokens; each ``<img>path</img>`` becomes exactly IMG_TOKEN_SPAN + 2 tokens."""
        tokens: list = []
        start = 0
        for match in IMAGE_SPAN.finditer(text):
            tokens.extend(self._text_tokens(text[start : match.start()]))
            path = [bytes([b]) for b in match.group(1).encode("utf-8")]
            if len(path) > IMG_TOKEN_SPAN:
                raise ValueError(f"The content in {IMG_START}..{IMG_END} is too long")
            tokens += [IMG_START, *path, *[IMG_PAD] * (IMG_TOKEN_SPAN - len(path)), IMG_END]
            start = match.end()
        return tokens + self._text_tokens(text[start:])

    def _convert_token_to_id(self, token) -> int:
        return self.encoder[token]

    def _convert_id_to_token(self, index: int):
        return self.decoder[index]

    def convert_tokens_to_string(self, tokens: list) -> str:
        raw = b"".join(t if isinstance(t, bytes) else t.encode("utf-8") for t in tokens)
        return raw.decode("utf-8", errors="replace")

    def _decode(self, token_ids, skip_special_tokens: bool = False, **kwargs) -> str:
        ids = [token_ids] if isinstance(token_ids, int) else list(token_ids)
        if skip_special_tokens:
            ids = [i for i in ids if i < self.eod_id]
        return self.convert_tokens_to_string([self.decoder[i] for i in ids])

    def from_list_format(self, list_format: list[dict]) -> str:
        """The query text of interleaved entries: "Picture n: <img>path</img>\\n" per image, text as is."""
        text = ""
        num_images = 0
        for entry in list_format:
            if "image" in entry:
                num_images += 1
                text += f"Picture {num_images}: {IMG_START}{entry['image']}{IMG_END}\n"
            elif "text" in entry:
                text += entry["text"]
            else:
                raise ValueError(f"Unsupported element: {entry}")
        return text
