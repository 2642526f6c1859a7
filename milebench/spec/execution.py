"""How a model is run, as data: prompt template, image preprocessing, tokenization, decoding loop, dtype,
stop strings, and which tokenizer counts.

A model spec states the choices of the run the paper reports (``execution``); every faster or newer
way of running it is a named variant of ``execution.variants``, which a run spec selects per model
(``RunSpec.execution``). A selected variant replaces the choices and names itself in
``applied_variant``, so it enters every prediction's cache key and the job's provenance: a variant is
never used silently. A spec without ``execution`` runs with its adapter's defaults
(its module's declared ``execution``, :data:`GENERIC`); :mod:`milebench.spec.model_execution` resolves
which choices a model spec runs with.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, ValidationError, model_validator

from milebench.spec.base import Spec, describe_errors


class PromptTemplate(StrEnum):
    """The turn format around the prepared prompt."""

    LLAVA_LLAMA_2 = "llava_llama_2"
    """LLaVA's ``llava_llama_2`` conversation, as the official MileBench LLaVA worker uses it:
    ``[INST] <<SYS>>\\n{system}\\n<</SYS>>\\n\\n{prompt} [/INST]``."""
    CHAT_TEMPLATE = "chat_template"
    """The checkpoint processor's own chat template, one user turn."""
    USER_ASSISTANT = "user_assistant"
    """``USER: {prompt} ASSISTANT:``, the format of the llava-hf LLaVA-1.5 model cards."""
    YI_MM_DEFAULT = "yi_mm_default"
    """Yi-VL's ``conv_templates["mm_default"]`` (github.com/01-ai/Yi, ``VL/llava/conversation.py``) for one
    user message and an open assistant turn: ``{system}\\n\\n### Human: {prompt}\\n### Assistant:``,
    with its bilingual system text; its separator ``###`` is the stop keyword."""
    MLLAVA_V1 = "mllava_v1"
    """Mantis's ``conv_mllava_v1`` as ``chat_mllava`` renders one turn (github.com/TIGER-AI-Lab/Mantis,
    ``mantis/models/conversation.py``), with the ``MLlavaProcessor``'s image denotation:
    ``{system}</s>USER: {prompt}</s>ASSISTANT:``, the j-th ``<image>`` written
    ``(image j: <Image><image></Image>)``."""
    MINIGPT_V2 = "minigpt_v2"
    """MiniGPT-v2's ``CONV_VISION_minigptv2`` (github.com/Vision-CAIR/MiniGPT-4,
    ``minigpt4/conversation/conversation.py``) with the empty system text of its benchmark evaluation:
    ``<s>[INST] {prompt} [/INST]``, each picture written ``<Img><ImageHere></Img>``."""
    CHEETOR_LLAMA2 = "cheetor_llama2"
    """Cheetor's ``CONV_VISION`` of ``conversation_llama2.py`` (github.com/DCDmllm/Cheetah) as
    ``Chat.batch_answer`` fills it: the text pieces between placeholders that are not blank and one
    ``<Img><HereForImage></Img>`` per picture, joined by spaces, in ``[INST] <<SYS>>\n\n<</SYS>>\n\n{message}
    [/INST]`` (its empty system text)."""
    VIDEO_LLAMA_2_CHAT = "video_llama_2_chat"
    """Video-LLaMA-2's ``conv_llava_llama_2`` of ``conversation_video.py``
    (github.com/DAMO-NLP-SG/Video-LLaMA) with the system text ``demo_video.py`` sets for an upload:
    ``[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{message} [/INST]``, the message the text pieces that are not
    blank and one ``<Image><ImageHere></Image> `` per picture (``Chat.upload_img``), joined by spaces as
    ``Chat.ask`` joins them."""
    VIDEOCHAT2 = "videochat2"
    """VideoChat2's conversation of ``conversation.py`` (github.com/OpenGVLab/Ask-Anything, ``video_chat2``)
    as its ``Chat`` builds it over the demo's state: ``###Human: {message}###`` per message (each text piece
    that is not blank, with ``Chat.ask``'s newline, and each picture's ``<Image><ImageHere></Image>\n`` a
    message of its own), then ``Assistant:``; the system text is empty."""
    OPEN_FLAMINGO = "open_flamingo"
    """OpenFlamingo's interleaved text (github.com/mlfoundations/open_flamingo, its README's generation
    example and evaluation prompts): no turn and no system text, each picture an ``<image>`` token in
    place, the question's chunk left open (no ``<|endofchunk|>``), so the model continues it."""
    OPEN_FLAMINGO_CHUNKED = "open_flamingo_chunked"
    """OpenFlamingo's interleaved text with an ``<|endofchunk|>`` before every ``<image>`` but the first,
    as its training data closes each picture's chunk of text before the next picture."""
    VICUNA_V1 = "vicuna_v1"
    """LLaVA's ``conv_vicuna_v1`` for one user message and an open assistant turn:
    ``{system} USER: {prompt} ASSISTANT:``, its ``sep2`` ``</s>`` the stop keyword. VILA's
    (github.com/Efficient-Large-Model/VILA, ``llava/conversation.py``; the conversation its README runs
    VILA-7B with) and LLaMA-VID's copy (github.com/dvlab-research/LLaMA-VID, ``llamavid/conversation.py``;
    its video evaluation's ``--conv-mode vicuna_v1``) are the same text."""
    VALLEY = "valley"
    """Valley's ``build_inputs`` (github.com/RupertLuo/Valley, ``valley/model/valley_model.py``) on the
    messages of ``valley/inference/run_valley_llamma_v2.py``: ``{system}\n\n###`` then `` Assistent: Hi
    there! How can I help you today? \n###`` (its user ``Hi!`` holds no ``<video>``, so build_inputs drops
    it) and `` Human: {prompt} \n###``, the prompt's video already written as its tokens; no assistant
    turn is opened. The stop keyword is ``###``."""
    LWM = "lwm"
    """LWM's ``Sampler.construct_input`` (github.com/LargeWorldModel/LWM, ``lwm/vision_chat.py``): the ids of
    ``<s>You are a helpful assistant. USER: {prompt}\n`` (the prompt without its image placeholders), then
    each vision as ``<vision>``, its VQGAN codes (each frame closed by ``<eov>``) and ``</vision>``, then
    `` ASSISTANT:``, each piece tokenized on its own."""
    QWEN_CHAT = "qwen_chat"
    """Qwen-VL-Chat's ``chat``: a chatml turn built by the checkpoint's remote code."""
    ALLAVA = "allava"
    """ALLaVA's ``chat`` (its code base's ``Chatbot.chat``): ``<image>``, ``<s>`` and ``</s>`` leave the
    text, one ``<image>\\n`` per picture goes in front of it, and the turn is ``[INST] {text} [/INST] ``."""
    ALLAVA_INTERLEAVED = "allava_interleaved"
    """ALLaVA's turn with each picture at its placeholder, where the official LLaVA worker puts it."""
    PLAIN = "plain"
    """The prepared prompt as it is (API messages, baselines)."""


class ImagePreprocessing(StrEnum):
    PAD_TO_SQUARE = "pad_to_square"
    """LLaVA's ``expand2square``: each picture is centred on a square of its longer side filled with the
    image processor's mean colour (``int(x * 255)`` per channel), then the processor runs; the official
    worker's ``process_images`` with ``image_aspect_ratio: pad``."""
    PROCESSOR = "processor"
    """The image processor alone (for CLIP: resize the shorter side, then centre-crop)."""


class ImageSequence(StrEnum):
    """How a task's pictures reach a video model: MileBench gives every task as a sequence of images."""

    IMAGES = "images"
    """Each picture through the model's image input, at its own placeholder."""
    VIDEO_FRAMES = "video_frames"
    """All of a sample's pictures, in order, as the frames of one video through the model's video input."""


class ImageBackend(StrEnum):
    """Which implementation of the image processor runs: transformers 5 defaults to torchvision when it
    is installed, whose resizing differs from the PIL code the paper-era stack ran."""

    PIL = "pil"
    DEFAULT = "default"


class Tokenization(StrEnum):
    PER_CHUNK = "per_chunk"
    """LLaVA's ``tokenizer_image_token``: the text between image tokens is tokenized chunk by chunk
    (LLaVA: each with the tokenizer's special tokens, the BOS of every later chunk dropped; ALLaVA's
    copy: without special tokens) and one image id joins the chunks. SentencePiece tokenizers may give
    other ids than for the whole string."""
    WHOLE = "whole"
    """The processor tokenizes the whole text."""


class Decoding(StrEnum):
    PER_SAMPLE = "per_sample"
    """One ``generate`` call per sample, unpadded: the official worker's loop."""
    BATCHED = "batched"
    """One ``generate`` call per batch with left padding: faster; padding can change greedy outputs."""


class Backend(StrEnum):
    """The engine that runs the model: ``transformers`` (the kit's adapters) or vLLM (a variant only;
    ``milebench.infer.vllm_backend``)."""

    TRANSFORMERS = "transformers"
    VLLM = "vllm"


class Dtype(StrEnum):
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class Autocast(StrEnum):
    """``torch.autocast`` around ``generate`` on a GPU."""

    OFF = "off"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"


class Aspect(StrEnum):
    """The parts of running a model that can change its answers, as the report's fidelity table
    lists them; the execution fields each one covers are in :data:`ASPECT_FIELDS`."""

    PROMPT = "prompt"
    IMAGES = "images"
    TOKENIZATION = "tokenization"
    DECODING = "decoding"
    PRECISION = "precision"
    STOP = "stop"
    TOKENIZER = "tokenizer"
    """Which tokenizer counts tokens for truncation and tokenizes the input (no field: the checkpoint's)."""


ASPECT_FIELDS: dict[Aspect, tuple[str, ...]] = {
    Aspect.PROMPT: ("prompt_template",),
    Aspect.IMAGES: ("image_preprocessing", "image_backend", "image_sequence"),
    Aspect.TOKENIZATION: ("tokenization", "original_vocab_only"),
    Aspect.DECODING: ("decoding", "backend"),
    Aspect.PRECISION: ("dtype", "autocast"),
    Aspect.STOP: ("stop_strings",),
    Aspect.TOKENIZER: (),
}


class ExecutionVariant(Spec):
    """A named way of running the model other than the paper's: the choices it states replace the
    model's; the others stay."""

    description: str = Field(description="What the variant changes and why one would use it.")
    prompt_template: PromptTemplate | None = None
    image_preprocessing: ImagePreprocessing | None = None
    image_backend: ImageBackend | None = None
    image_sequence: ImageSequence | None = Field(default=None, exclude_if=lambda value: value is None)
    """Left out of dumps when unset, so the variants written before it keep their hashes."""
    tokenization: Tokenization | None = None
    decoding: Decoding | None = None
    dtype: Dtype | None = None
    autocast: Autocast | None = None
    stop_strings: tuple[str, ...] | None = None
    original_vocab_only: bool | None = None
    backend: Backend | None = Field(default=None, exclude_if=lambda value: value is None)
    """Left out of dumps when unset, so the variants written before it keep their hashes."""
    container: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The image family (folder under containers/) the variant runs in instead of the "
        "model's own: where its backend is installed. Not an execution choice: the run's model spec "
        "takes it. Left out of dumps when unset, so the variants written before it keep their hashes.",
    )


class Execution(Spec):
    """The choices a model runs with. Defaults are the kit's generic transformers path."""

    prompt_template: PromptTemplate = PromptTemplate.CHAT_TEMPLATE
    image_preprocessing: ImagePreprocessing = ImagePreprocessing.PROCESSOR
    image_backend: ImageBackend = ImageBackend.DEFAULT
    image_sequence: ImageSequence = Field(
        default=ImageSequence.IMAGES,
        exclude_if=lambda value: value is ImageSequence.IMAGES,
        description="How the sample's pictures reach the model: each at its placeholder through the image "
        "input, or together as the frames of one video (video models). Left out of dumps when it is "
        "images, so the specs written before it keep their hashes and cache keys.",
    )
    tokenization: Tokenization = Tokenization.WHOLE
    decoding: Decoding = Decoding.BATCHED
    dtype: Dtype = Field(
        default=Dtype.BFLOAT16,
        description="The weights' dtype on a GPU; on a CPU the kit runs float32 (half-precision CPU "
        "kernels are slow and differ by build).",
    )
    autocast: Autocast = Field(default=Autocast.OFF, description="On a GPU, generate under torch.autocast.")
    stop_strings: tuple[str, ...] = Field(
        default=(),
        description="LLaVA's KeywordsStoppingCriteria: generation stops when the new tokens end with a "
        "string's token ids or the decoded tail holds it; the string stays in the answer, as officially.",
    )
    original_vocab_only: bool = Field(
        default=False,
        description="Never generate ids at or above the tokenizer's base vocabulary: the tokens a hub "
        "conversion added (llava-hf's <image>, <pad> and embedding padding) that the original model lacks.",
    )
    backend: Backend = Field(
        default=Backend.TRANSFORMERS,
        exclude_if=lambda value: value is Backend.TRANSFORMERS,
        description="The engine: transformers, or vllm for a variant. Left out of dumps when it is "
        "transformers, so the specs written before it keep their hashes and cache keys.",
    )
    deviations: dict[Aspect, str] = Field(
        default_factory=dict,
        description="Where these choices still differ from the run the paper reports, and why, by aspect; "
        "an aspect not named is as that run had it (the report's fidelity table shows both).",
    )
    no_official_worker: str | None = Field(
        default=None,
        description="Set where the official code ships no worker for the model, so the paper's run of it "
        "is not published: what these choices follow instead. An aspect not in deviations is then "
        "unknown against that run, never as official.",
    )
    source: str | None = Field(default=None, description="Where these choices come from.")
    variants: dict[str, ExecutionVariant] = Field(
        default_factory=dict, description="Other named ways to run the model; a run spec selects one."
    )
    applied_variant: str | None = Field(
        default=None,
        description="Set by the kit to the variant a run selected (never in a spec file); null: the "
        "model's own choices.",
    )

    @model_validator(mode="after")
    def _variants_apply(self) -> Execution:
        bad = [name for name in self.variants if not name or name == PAPER]
        if bad:
            raise ValueError(f"variant names must be non-empty and not {PAPER!r}: {bad}")
        for name in self.variants:
            try:
                self.with_variant(name)
            except ValidationError as err:
                raise ValueError(f"variant {name!r}: {describe_errors(err)}") from None
        return self

    @property
    def label(self) -> str:
        """``paper`` or the applied variant's name."""
        return self.applied_variant or PAPER

    def with_variant(self, name: str) -> Execution:
        """These choices with variant ``name`` applied (``paper``: unchanged)."""
        if name == PAPER:
            return self
        if name not in self.variants:
            known = ", ".join([PAPER, *sorted(self.variants)])
            raise KeyError(f"no execution variant {name!r} (known: {known})")
        # Not choices: the variant's text, and the image it runs in (the model spec's, see for_run).
        changes = self.variants[name].model_dump(exclude={"description", "container"}, exclude_none=True)
        return Execution.model_validate(
            {**self.model_dump(), **changes, "variants": {}, "applied_variant": name}
        )


PAPER = "paper"
"""The name of a model's own choices, as a run spec selects them."""


GENERIC = Execution(source="the kit's transformers path: the checkpoint's processor and chat template")
"""The execution of a spec that states none, where its adapter declares ``execution: generic``. API models
and baselines have none: the provider or the kit's own code decides. The remote-code adapters
(Qwen-VL-Chat, ALLaVA) have none either: their spec states how the checkpoint's code runs, or they refuse
to load."""
