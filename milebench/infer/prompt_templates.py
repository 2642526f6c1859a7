"""Fixed turn formats around a prompt whose image tokens are already in place.

``llava_llama_2`` renders what LLaVA's ``conv_templates["llava_llama_2"].get_prompt()`` returns for one
user message and an open assistant turn: the conversation's ``<s>`` separator is stripped from the
front, so the text starts at ``[INST]`` (the tokenizer adds BOS). ``yi_mm_default`` is Yi-VL's
``conv_templates["mm_default"].get_prompt()``, ``vicuna_v1`` VILA's and LLaMA-VID's
``conv_templates["vicuna_v1"].get_prompt()`` and ``mllava_v1`` what Mantis's ``chat_mllava`` hands the
tokenizer after its ``MLlavaProcessor`` has denoted the images; ``open_flamingo`` is OpenFlamingo's
interleaved text, which has no turn (``open_flamingo_chunked`` closes each picture's chunk before the
next picture); ``valley`` is what Valley's ``build_inputs`` writes for the messages of its Valley2-7b
script. Checkpoint-defined formats (chat
templates, Qwen's ``chat``) are rendered by their adapters.
"""

from __future__ import annotations

from collections.abc import Callable

from milebench.records import IMAGE_PLACEHOLDER
from milebench.spec.execution import PromptTemplate

LLAVA_LLAMA_2_SYSTEM = (
    "You are a helpful language and vision assistant. You are able to understand the visual content "
    "that the user provides, and assist the user with a variety of tasks using natural language."
)
LLAVA_LLAMA_2_STOP = "<s>"
"""The conversation's ``sep``, which the official worker passes as its stop keyword."""


YI_MM_DEFAULT_SYSTEM = (
    "This is a chat between an inquisitive human and an AI assistant. Assume the role of the AI assistant. "
    "Read all the images carefully, and respond to the human's questions with informative, helpful, "
    "detailed and polite answers. "
    "这是一个好奇的人类和一个人工智能助手之间的对话。"
    "假设你扮演这个AI助手的角色。"
    "仔细阅读所有的图像，并对人类的问题做出信息丰富、有帮助、详细的和礼貌的回答。"  # noqa: RUF001 (the original's full-width comma)
)
YI_MM_DEFAULT_STOP = "###"
"""The conversation's ``sep``, which Yi-VL's ``single_inference.py`` passes as its stop keyword."""

VICUNA_V1_SYSTEM = (
    "A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user's questions."
)
VICUNA_V1_STOP = "</s>"
"""The conversation's ``sep2`` (separator style TWO), which VILA's ``run_llava.py`` and LLaMA-VID's video
evaluation pass as their stop keyword."""

MLLAVA_V1_SYSTEM = (
    "A chat between a curious human and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the human's questions."
)
MLLAVA_IMAGE_TOKEN = "<image>"
"""The image token ``MLlavaProcessor`` looks for (a literal in its code)."""


def llava_llama_2(prompt: str) -> str:
    return f"[INST] <<SYS>>\n{LLAVA_LLAMA_2_SYSTEM}\n<</SYS>>\n\n{prompt} [/INST]"


def yi_mm_default(prompt: str) -> str:
    return f"{YI_MM_DEFAULT_SYSTEM}\n\n### Human: {prompt}\n### Assistant:"


def vicuna_v1(prompt: str) -> str:
    return f"{VICUNA_V1_SYSTEM} USER: {prompt} ASSISTANT:"


def mllava_v1(prompt: str) -> str:
    """The turn with every image token denoted as ``MLlavaProcessor`` does:
    ``(image j: <Image><image></Image>)`` for the j-th image, counted from 1."""
    first, *rest = prompt.split(MLLAVA_IMAGE_TOKEN)
    denoted = first + "".join(
        f"(image {j}: <Image>{MLLAVA_IMAGE_TOKEN}</Image>){piece}" for j, piece in enumerate(rest, start=1)
    )
    return f"{MLLAVA_V1_SYSTEM}</s>USER: {denoted}</s>ASSISTANT:"


MINIGPT_V2_IMAGE = "<Img><ImageHere></Img>"
"""How MiniGPT-v2's ``Chat.upload_img`` writes a picture into the user's message."""


def minigpt_v2(prompt: str) -> str:
    """MiniGPT-v2's ``CONV_VISION_minigptv2`` for one user message with an empty system text, as its
    ``eval_scripts/eval_vqa.py`` renders it, each ``<ImageHere>`` written as ``Chat.upload_img`` does."""
    return f"<s>[INST] {prompt.replace('<ImageHere>', MINIGPT_V2_IMAGE)} [/INST]"


CHEETOR_IMAGE = "<Img><HereForImage></Img>"
"""How Cheetor's ``Chat`` writes a picture into the user's message (split at ``<HereForImage>``)."""


def cheetor_llama2(prompt: str) -> str:
    """Cheetor's LLaMA2 turn as ``Chat.batch_answer`` builds it from a prompt with ``<ImageHere>``
    placeholders: a piece that is blank is dropped (``ask`` is skipped), the rest and the pictures are
    joined by spaces into the one user message, the system text is empty."""
    return f"[INST] <<SYS>>\n\n<</SYS>>\n\n{joined_message(prompt, CHEETOR_IMAGE)} [/INST]"


def joined_message(prompt: str, image: str) -> str:
    """One user message as the MiniGPT-4 descendants' ``Chat.ask`` joins turns: the pieces between
    ``<ImageHere>`` placeholders that are not blank and ``image`` per picture, in order, joined by spaces."""
    pieces = prompt.split("<ImageHere>")
    parts: list[str] = []
    for i, piece in enumerate(pieces):
        parts += [piece] if piece.strip() else []
        parts += [image] if i < len(pieces) - 1 else []
    return " ".join(parts)


VIDEO_LLAMA_IMAGE = "<Image><ImageHere></Image> "
"""How Video-LLaMA's ``Chat.upload_img`` writes a picture into the user's message (split at
``<ImageHere>``)."""
VIDEO_LLAMA_SYSTEM = (
    "You are able to understand the visual content that the user provides. Follow the instructions "
    "carefully and explain your answers in detail."
)
"""The system text ``demo_video.py`` sets on ``conv_llava_llama_2`` before an image or a video upload."""


VIDEO_LLAMA_VIDEO = "<Video><ImageHere></Video> "
"""How Video-LLaMA's ``Chat.upload_video_without_audio`` writes a video into the user's message (its
``load_video`` message after it, which the kit leaves empty: MileBench's pictures have no timestamps)."""


def video_llama_2_turn(message: str) -> str:
    """``conv_llava_llama_2`` with ``demo_video.py``'s system text and one user message; ``get_prompt``
    strips the leading ``<s>`` separator, so the text starts at ``[INST]``."""
    return f"[INST] <<SYS>>\n{VIDEO_LLAMA_SYSTEM}\n<</SYS>>\n\n{message} [/INST]"


def video_llama_2_chat(prompt: str) -> str:
    """Video-LLaMA-2's turn with its one user message joined as ``Chat.ask`` joins a question to an
    uploaded picture, each picture at its placeholder."""
    return video_llama_2_turn(joined_message(prompt, VIDEO_LLAMA_IMAGE))


def video_llama_2_video(prompt: str) -> str:
    """Video-LLaMA-2's turn after ``Chat.upload_video_without_audio`` and ``Chat.ask``: the one video
    (all of the sample's pictures) first, then the prompt with its placeholders taken out, joined by a
    space as ``Chat.ask`` joins a question to an upload."""
    return video_llama_2_turn(joined_message(IMAGE_PLACEHOLDER + without_pictures(prompt), VIDEO_LLAMA_VIDEO))


def without_pictures(prompt: str) -> str:
    """The prompt with its image placeholders taken out: the pictures reach a video model as one video."""
    return prompt.replace(IMAGE_PLACEHOLDER, "")


VIDEOCHAT2_IMAGE = "<Image><ImageHere></Image>\n"
"""How VideoChat2's ``Chat.upload_img`` writes a picture as a user message (split at ``<ImageHere>``)."""


def videochat2(prompt: str) -> str:
    """VideoChat2's conversation as its ``Chat`` builds it (``conversation.py``: ``get_prompt`` over the
    demo's state, system text empty, separator ``###``, roles ``Human`` and ``Assistant``): each text piece
    between ``<ImageHere>`` placeholders that is not blank a ``Human`` message of its own (``Chat.ask``
    appends a newline), each picture one (``Chat.upload_img``), in order, then the open ``Assistant:``."""
    pieces = prompt.split("<ImageHere>")
    messages: list[str] = []
    for i, piece in enumerate(pieces):
        messages += [piece + "\n"] if piece.strip() else []
        messages += [VIDEOCHAT2_IMAGE] if i < len(pieces) - 1 else []
    return "###" + "".join(f"Human: {message}###" for message in messages) + "Assistant:"


VIDEOCHAT2_VIDEO_MARKER = "<VideoHere>"
"""Where ``Chat.get_context_emb`` splits a text that holds a video (and then only there)."""
VIDEOCHAT2_VIDEO = f"<Video>{VIDEOCHAT2_VIDEO_MARKER}</Video>\n"
"""How VideoChat2's ``Chat.upload_video`` writes a video as a user message."""


def videochat2_video(prompt: str) -> str:
    """VideoChat2's conversation after ``demo.py``'s video upload and one question: the video
    (``Chat.upload_video``, all of the sample's pictures; none without pictures) as the first ``Human``
    message, then the prompt with its placeholders taken out as one more (``Chat.ask``, where not blank),
    then the open ``Assistant:``."""
    question = without_pictures(prompt)
    messages = [VIDEOCHAT2_VIDEO] if IMAGE_PLACEHOLDER in prompt else []
    messages += [question + "\n"] if question.strip() else []
    return "###" + "".join(f"Human: {message}###" for message in messages) + "Assistant:"


OPEN_FLAMINGO_IMAGE_TOKEN = "<image>"
"""The media token OpenFlamingo's ``create_model_and_transforms`` adds to the tokenizer."""
OPEN_FLAMINGO_END_OF_CHUNK = "<|endofchunk|>"
"""The token that ends a picture's chunk of text (added beside ``<image>``); its generate stops on it."""


def open_flamingo_chunked(prompt: str) -> str:
    """Every ``<image>`` after the first preceded by ``<|endofchunk|>``."""
    first, *rest = prompt.split(OPEN_FLAMINGO_IMAGE_TOKEN)
    if not rest:
        return first
    head, *tail = rest
    joiner = OPEN_FLAMINGO_END_OF_CHUNK + OPEN_FLAMINGO_IMAGE_TOKEN
    return first + OPEN_FLAMINGO_IMAGE_TOKEN + head + "".join(joiner + piece for piece in tail)


VALLEY_SYSTEM = (
    "You are Valley, a large language and vision assistant trained by ByteDance. You are able to understand "
    "the visual content or video that the user provides, and assist the user with a variety of tasks using "
    "natural language. Follow the instructions carefully and explain your answers in detail."
)
"""The system prompt of ``valley/inference/run_valley_llamma_v2.py``."""
VALLEY_GREETING = "Hi there! How can I help you today?"
"""The assistant message that script sends before the query (its user ``Hi!`` before it is dropped)."""
VALLEY_STOP = "###"
"""The keyword ``completion`` gives Valley's ``KeywordsStoppingCriteria`` and cuts answers at."""


def valley(prompt: str) -> str:
    """``build_inputs`` of the script's messages, the user's message (with its video tokens) last."""
    greeting = f" Assistent: {VALLEY_GREETING} \n{VALLEY_STOP}"
    return f"{VALLEY_SYSTEM}\n\n{VALLEY_STOP}{greeting} Human: {prompt} \n{VALLEY_STOP}"


LWM_SYSTEM = "<s>You are a helpful assistant. USER: "
"""The start of ``construct_input``'s first text piece, BOS written as text."""
LWM_VISION_START = "<vision>"
LWM_VISION_END = "</vision>"
LWM_ASSISTANT = " ASSISTANT:"
"""``construct_input``'s last piece, after the visions."""


def lwm(prompt: str) -> str:
    """``construct_input``'s text with ``prompt`` (its visions already written in it)."""
    return f"{LWM_SYSTEM}{prompt}{LWM_ASSISTANT}"


def user_assistant(prompt: str) -> str:
    return f"USER: {prompt} ASSISTANT:"


def plain(prompt: str) -> str:
    return prompt


FIXED_TEMPLATES: dict[PromptTemplate, Callable[[str], str]] = {
    PromptTemplate.LLAVA_LLAMA_2: llava_llama_2,
    PromptTemplate.YI_MM_DEFAULT: yi_mm_default,
    PromptTemplate.VICUNA_V1: vicuna_v1,
    PromptTemplate.MLLAVA_V1: mllava_v1,
    PromptTemplate.MINIGPT_V2: minigpt_v2,
    PromptTemplate.CHEETOR_LLAMA2: cheetor_llama2,
    PromptTemplate.VIDEO_LLAMA_2_CHAT: video_llama_2_chat,
    PromptTemplate.VIDEOCHAT2: videochat2,
    PromptTemplate.OPEN_FLAMINGO: plain,
    PromptTemplate.OPEN_FLAMINGO_CHUNKED: open_flamingo_chunked,
    PromptTemplate.VALLEY: valley,
    PromptTemplate.LWM: lwm,
    PromptTemplate.USER_ASSISTANT: user_assistant,
    PromptTemplate.PLAIN: plain,
}
