"""Prompt templates are declared where their family lives: a literal ``TEMPLATES`` in its module.

A family's module (the one its ``milebench.adapters`` entry point names) lists the turn formats it
provides, each with its sourced description, and renders each one by its function of that name::

    TEMPLATES = {"yi_mm_default": "Yi-VL's conv_templates['mm_default'] (github.com/01-ai/Yi) ..."}

    def yi_mm_default(prompt: str) -> str: ...

The formats several families share (``chat_template``, ``user_assistant``, ...) are declared once, in the
kit's :data:`SHARED` module. As with adapters, the declarations are read from the source without importing
it: specs are validated where torch is missing. A renderer is imported only when a prompt is rendered
(``milebench.infer.registry.template_renderer``); a template with no function of its name (a checkpoint's
chat template, remote code) is rendered by its adapter.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field, TypeAdapter, ValidationError

from milebench.spec.adapters import BadAdapter, declared_adapters, module_literal
from milebench.spec.base import Spec, SpecError, field_errors, registered

DECLARATION = "TEMPLATES"
SHARED = "milebench.infer.prompt_templates"
"""The kit's module of the turn formats several families share."""
NAME = r"^[a-z][a-z0-9_]*$"
"""A template's name is its renderer's name in the declaring module."""

_DECLARED = TypeAdapter(dict[Annotated[str, Field(pattern=NAME)], Annotated[str, Field(min_length=1)]])


class DeclaredTemplate(Spec):
    """A template's declaration and where it was found."""

    module: str
    path: Path
    description: str


def templates_in(path: Path) -> dict[str, str]:
    """What the module at ``path`` declares in its literal ``TEMPLATES``: name -> description."""
    text = path.read_text(encoding="utf-8")
    if f"{DECLARATION} =" not in text:  # most modules: skip parsing
        return {}
    value = module_literal(path, text, DECLARATION)
    if value is None:
        return {}
    try:
        return _DECLARED.validate_python(value)
    except ValidationError as err:
        problems = field_errors(err)
        raise SpecError(
            path, [(f"{DECLARATION}.{field}".removesuffix(".<root>"), m) for field, m in problems]
        ) from None


def _shared_path() -> Path:
    found = importlib.util.find_spec(SHARED)
    if found is None or found.origin is None:
        raise BadAdapter(f"the kit's module {SHARED} is missing; reinstall the kit (pip install -e .)")
    return Path(found.origin)


@cache
def declared_templates() -> dict[str, DeclaredTemplate]:
    """Every declared template by name: the shared module's and those of each registered family's module
    (read, never imported); a name declared by two modules is refused."""
    modules = {SHARED: _shared_path()} | {d.module: d.path for d in declared_adapters().values()}
    found: dict[str, DeclaredTemplate] = {}
    for module, path in sorted(modules.items()):
        for name, description in templates_in(path).items():
            if name in found:
                raise SpecError(path, [(f"{DECLARATION}.{name}", f"also declared by {found[name].module}")])
            found[name] = DeclaredTemplate(module=module, path=path, description=description)
    return found


TemplateName = Annotated[
    str,
    Field(
        pattern=NAME,
        description="A declared prompt template: a name in the TEMPLATES of a registered family's module "
        "or of the kit's shared one (checked when the spec loads).",
    ),
    AfterValidator(lambda name: registered(name, declared_templates(), "prompt template")),
]
"""The turn formats the registered families and the kit declare."""
