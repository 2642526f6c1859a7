"""Adapter families, found where they live: each adapter module states what it is in a literal ``ADAPTER``.

A module that runs a model family starts with a literal declaration (or a list of them), e.g.::

    ADAPTER = {"kind": "hf-llava", "does": "generate", "entry": "HfLlavaAdapter", "execution": "generic",
               "tiny": {"family": "llava", "builder": "milebench.infer.tiny:build_tiny_llava"}}

The declarations are read from the package's source files with ``ast`` and never imported: specs are
validated by every CLI call and in images without torch, and an adapter module imports its model
libraries. Adding a family is one module (and a spec); nothing else lists the kinds. The adapter class
and the tiny builder are imported only when a model is run or built.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from milebench.package_data import package_path
from milebench.spec.base import Spec, SpecError, field_errors

PACKAGE = "milebench"
DECLARATION = "ADAPTER"
UNPORTED = "unported"
"""The adapter of models that need their original code base: a kind no module declares."""

PROXY_VARS = (
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
    "no_proxy",
)
"""Read by the requests session an adapter posts with (``proxies: true``). Proxy URLs can hold
credentials, so they are handled like keys: passed by name, values never logged. (The session's CA
bundle variables are the image's own.)"""

KIND = r"^[a-z0-9][a-z0-9-]*$"
TARGET = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"


class TinyBuilder(Spec):
    """The tiny random-weight checkpoint of the family, built offline for smoke runs and tests."""

    family: str = Field(pattern=KIND, description="The ``weights.family`` of ``kind: tiny`` specs.")
    builder: str = Field(pattern=TARGET, description="``module:function(spec, out_dir)``.")


class AdapterDeclaration(Spec):
    kind: str = Field(pattern=KIND, description="The value of a model spec's ``adapter`` (or ``kind``).")
    does: Literal["generate", "embed"] = Field(
        description="generate: answers MileBench prompts with text; embed: embeds interleaved sequences."
    )
    entry: str = Field(pattern=r"^[A-Za-z_]\w*$", description="The adapter class, in the declaring module.")
    environment: tuple[str, ...] = Field(default=(), description="Environment variables the adapter reads.")
    proxies: bool = Field(default=False, description="Posts through requests, so reads PROXY_VARS too.")
    tiny: TinyBuilder | None = Field(
        default=None, description="Its tiny family; null: none of its own (a generic kind loads any)."
    )
    execution: Literal["generic"] | None = Field(
        default=None,
        description="The execution of a spec that states none (generic: the kit's transformers path); "
        "null: the spec states it, or the provider or the kit's own code decides.",
    )


class DeclaredAdapter(Spec):
    """A declaration and where it was found."""

    module: str
    path: Path
    declaration: AdapterDeclaration

    @property
    def target(self) -> str:
        return f"{self.module}:{self.declaration.entry}"

    @property
    def environment(self) -> tuple[str, ...]:
        proxies = PROXY_VARS if self.declaration.proxies else ()
        return (*self.declaration.environment, *proxies)


def _literal(path: Path, text: str) -> object | None:
    """The value of the module-level ``ADAPTER = ...`` in ``text``; None when there is none."""
    for node in ast.parse(text, filename=str(path)).body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == DECLARATION
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                raise SpecError(
                    path, [(DECLARATION, "must be a literal (no names, calls or f-strings)")]
                ) from None
    return None


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join([PACKAGE, *(parts[:-1] if parts[-1] == "__init__" else parts)])


def _declared_in(root: Path, path: Path) -> list[DeclaredAdapter]:
    text = path.read_text(encoding="utf-8")
    if f"{DECLARATION} =" not in text:  # most modules: skip parsing
        return []
    value = _literal(path, text)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found = []
    for i, item in enumerate(items):
        try:
            declaration = AdapterDeclaration.model_validate(item)
        except ValidationError as err:
            where = DECLARATION if len(items) == 1 and not isinstance(value, list) else f"{DECLARATION}.{i}"
            raise SpecError(
                path, [(f"{where}.{field}", message) for field, message in field_errors(err)]
            ) from None
        found.append(DeclaredAdapter(module=_module_name(root, path), path=path, declaration=declaration))
    return found


@cache
def declared_adapters() -> dict[str, DeclaredAdapter]:
    """Every adapter declared in the package, by kind; a kind declared twice, or ``unported``, is refused."""
    root = package_path(PACKAGE)
    found: dict[str, DeclaredAdapter] = {}
    for path in sorted(root.rglob("*.py")):
        for declared in _declared_in(root, path):
            kind = declared.declaration.kind
            if kind == UNPORTED or kind in found:
                other = f"also declared in {found[kind].path}" if kind in found else "reserved"
                raise SpecError(path, [(f"{DECLARATION}.kind", f"{kind!r} is {other}")])
            found[kind] = declared
    return found


def adapter_kinds(does: Literal["generate", "embed"]) -> tuple[str, ...]:
    """The declared kinds that ``does``, sorted."""
    return tuple(sorted(k for k, d in declared_adapters().items() if d.declaration.does == does))


def declared(kind: str) -> DeclaredAdapter | None:
    """The declaration of ``kind``; None for ``unported`` (and any kind no module declares)."""
    return declared_adapters().get(kind)


def tiny_families(does: Literal["generate", "embed"] = "generate") -> dict[str, TinyBuilder]:
    """Each tiny family's builder, by family, from the adapters that ``does`` and declare one (an
    embedder's tiny family is no model a MileBench spec can name)."""
    return {
        d.declaration.tiny.family: d.declaration.tiny
        for d in declared_adapters().values()
        if d.declaration.tiny is not None and d.declaration.does == does
    }
