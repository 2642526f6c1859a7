"""Which tokenizer counts a text's length: a spec of its own, below the run spec, since the length counting
that the input records use reads it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from milebench.spec.base import Spec


class PackageTokenizer(Spec):
    """A tokenizer shipped inside an installed package with a ``get_model_path()`` (offline)."""

    kind: Literal["package"]
    package: str


class HubTokenizer(Spec):
    """A hub tokenizer (the paper counts with Qwen3's); the hub cache and offline mode apply."""

    kind: Literal["hub"]
    repo: str
    revision: str | None = None


class QwenVocabulary(Spec):
    """Qwen's BPE ranks shipped in a package, built into Qwen's tokenizer offline (``qwen_vocab``: how,
    and where it differs from Qwen3's hub tokenizer)."""

    kind: Literal["qwen-tiktoken"]
    package: str = "dashscope"
    file: str = Field(default="resources/qwen.tiktoken", description="The ranks file, inside the package.")
    sha256: str | None = Field(default=None, description="The ranks file's hash, checked at load.")


TokenizerRef = Annotated[PackageTokenizer | HubTokenizer | QwenVocabulary, Field(discriminator="kind")]
