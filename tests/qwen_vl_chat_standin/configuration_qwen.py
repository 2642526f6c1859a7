"""Configuration of the Qwen-VL-Chat stand-in: the real checkpoint's remote-code layout, at test size."""

from transformers import PretrainedConfig


class QWenConfig(PretrainedConfig):
    model_type = "qwen"

    def __init__(
        self,
        vocab_size: int = 262,
        hidden_size: int = 8,
        image_pixels: int = 4,
        image_start_id: int = 259,
        image_end_id: int = 260,
        bf16: bool = False,
        fp16: bool = False,
        fp32: bool = False,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.image_pixels = image_pixels
        """Pictures are read at image_pixels x image_pixels RGB."""
        self.image_start_id = image_start_id
        self.image_end_id = image_end_id
        self.bf16, self.fp16, self.fp32 = bf16, fp16, fp32
        """The precision switch: at most one set; none lets the model choose (as Qwen-VL-Chat's does)."""
        super().__init__(**kwargs)
