"""A tiny stand-in with the interface of ALLaVA-3B-Longer's remote code (``modeling_llava_phi.py`` over
``llava_arch.py``), faithful in what decides the input:

- ``generate(inputs=ids, images=pixels)``: each ``IMAGE_TOKEN_INDEX`` (-200) id of the ids becomes the
  features of the next picture (the last one again when the ids outnumber the pictures), the text
  between them is embedded as it is;
- a CLIP vision tower named by ``config.mm_vision_tower``: its config is read at construction, its
  ``image_processor`` by ``load_model`` (the checkpoint calls it at construction); ``patch`` features drop
  the CLS feature;
- the image features of the first forward pass are cached on the model (``cached_image_features``) and
  reused until someone sets them to None, as ``Chatbot.clear_history`` does;
- the embedded prompt is cut to ``config.tokenizer_model_max_length`` positions.

A GRU stands in for Phi-2; the running mean of the inputs joins its state, so pictures far back still
change the answer.
"""

import torch
from torch import nn
from transformers import (
    CLIPImageProcessor,
    CLIPVisionConfig,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutput

IMAGE_TOKEN_INDEX = -200


class LlavaPhiConfig(PretrainedConfig):
    model_type = "llava_phi"

    def __init__(
        self,
        vocab_size: int = 400,
        hidden_size: int = 8,
        mm_hidden_size: int = 6,
        max_position_embeddings: int = 2048,
        image_aspect_ratio: str = "pad",
        mm_projector_type: str = "linear",
        mm_vision_select_feature: str = "patch",
        mm_vision_select_layer: int = -2,
        mm_vision_tower: str | None = None,
        tokenizer_model_max_length: int | None = None,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.mm_hidden_size = mm_hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.image_aspect_ratio = image_aspect_ratio
        self.mm_projector_type = mm_projector_type
        self.mm_vision_select_feature = mm_vision_select_feature
        self.mm_vision_select_layer = mm_vision_select_layer
        self.mm_vision_tower = mm_vision_tower
        self.tokenizer_model_max_length = tokenizer_model_max_length
        super().__init__(**kwargs)


class CLIPVisionTower(nn.Module):
    """Pictures -> one feature per patch of the tower's patch size (plus CLS under ``cls_patch``)."""

    def __init__(self, config: LlavaPhiConfig):
        super().__init__()
        self.is_loaded = False
        self.vision_tower_name = config.mm_vision_tower
        self.select_feature = config.mm_vision_select_feature
        self.cfg_only = CLIPVisionConfig.from_pretrained(self.vision_tower_name)
        self.patch = self.cfg_only.patch_size
        self.proj = nn.Linear(3 * self.patch**2, config.mm_hidden_size)
        self.cls = nn.Parameter(torch.zeros(config.mm_hidden_size))

    def load_model(self) -> None:
        self.image_processor = CLIPImageProcessor.from_pretrained(self.vision_tower_name)
        self.is_loaded = True

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        p, n = self.patch, images.shape[0]
        patches = images.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(n, -1, 3 * p * p)
        features = self.proj(patches.to(self.proj.weight.dtype))
        if self.select_feature == "patch":
            return features
        if self.select_feature == "cls_patch":
            return torch.cat([self.cls.expand(n, 1, -1), features], dim=1)
        raise ValueError(f"Unexpected select feature: {self.select_feature}")


class LlavaPhiModel(nn.Module):
    def __init__(self, config: LlavaPhiConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.vision_tower = CLIPVisionTower(config)
        self.mm_projector = nn.Linear(config.mm_hidden_size, config.hidden_size)

    def get_vision_tower(self) -> CLIPVisionTower:
        return self.vision_tower


class LlavaPhiForCausalLM(PreTrainedModel, GenerationMixin):
    config_class = LlavaPhiConfig

    def __init__(self, config: LlavaPhiConfig, init_vision_encoder_from_ckpt: bool = True):
        super().__init__(config)
        self.model = LlavaPhiModel(config)
        self.rnn = nn.GRU(config.hidden_size, config.hidden_size, batch_first=True)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size)
        self.cached_image_features: torch.Tensor | None = None
        self.prompt_length = 0
        self.post_init()
        if init_vision_encoder_from_ckpt:
            self.get_vision_tower().load_model()

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """No key/value cache for ``use_cache``: the GRU reads the whole sequence at every step."""
        return False

    def _init_weights(self, module: nn.Module) -> None:
        """Wide weights, so greedy answers vary with the input."""
        for param in module.parameters(recurse=False):
            nn.init.normal_(param, std=1.0)

    def get_model(self) -> LlavaPhiModel:
        return self.model

    def get_vision_tower(self) -> CLIPVisionTower:
        return self.model.get_vision_tower()

    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.mm_projector(self.get_vision_tower()(images))

    def embed_prompt(self, ids: torch.Tensor) -> torch.Tensor:
        """One row as llava_arch's ``prepare_inputs_labels_for_multimodal_new`` embeds it."""
        features = self.cached_image_features
        bounds = [-1, *(ids == IMAGE_TOKEN_INDEX).nonzero().flatten().tolist(), len(ids)]
        pieces = []
        for i in range(len(bounds) - 1):
            pieces.append(self.model.embed_tokens(ids[bounds[i] + 1 : bounds[i + 1]]))
            if i < len(bounds) - 2:
                pieces.append(features[min(i, len(features) - 1)])
        embeds = torch.cat(pieces)
        limit = self.config.tokenizer_model_max_length
        return embeds if limit is None else embeds[:limit]

    def forward(
        self,
        input_ids: torch.LongTensor,
        images: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> CausalLMOutput:
        if input_ids.shape[0] != 1:
            raise ValueError("the stand-in embeds one row at a time")
        row = input_ids[0] if attention_mask is None else input_ids[0][attention_mask[0].bool()]
        if self.cached_image_features is None:
            hidden = self.config.hidden_size
            self.cached_image_features = (
                self.encode_images(images) if images is not None else torch.empty(0, 0, hidden)
            )
            self.prompt_length = len(row)
        prompt = self.embed_prompt(row[: self.prompt_length])
        new = self.model.embed_tokens(row[self.prompt_length :])
        embeds = torch.cat([prompt, new])[None]
        hidden, _ = self.rnn(embeds)
        positions = torch.arange(1, embeds.shape[1] + 1, device=embeds.device)[None, :, None]
        running_mean = embeds.cumsum(dim=1) / positions
        return CausalLMOutput(logits=self.lm_head(hidden + running_mean))

    def prepare_inputs_for_generation(
        self,
        input_ids: torch.LongTensor,
        images: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> dict[str, torch.Tensor | None]:
        """The whole sequence each step (the prompt's embedding stays cached on the model); defining it
        is what makes the model one that can generate, so ``from_pretrained`` reads its
        generation_config.json, as it does for the real one."""
        return {"input_ids": input_ids, "images": images, "attention_mask": attention_mask}
