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
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.image_pixels = image_pixels
        """Pictures are read at image_pixels x image_pixels RGB."""
        self.image_start_id = image_start_id
        self.image_end_id = image_end_id
        super().__init__(**kwargs)
