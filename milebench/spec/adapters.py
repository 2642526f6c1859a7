"""Adapter families register by entry point and state what they are in their module's literal ``ADAPTER``.

A family is one module and one line of its distribution's metadata (the kit's own are in
``pyproject.toml``, any installed distribution adds families the same way)::

    [project.entry-points."milebench.adapters"]
    hf-llava = "milebench.infer.hf_llava:HfLlavaAdapter"

and the module declares that kind and class in a literal (or a list of them)::

    ADAPTER = {"kind": "hf-llava", "does": "generate", "entry": "HfLlavaAdapter", "execution": "generic",
               "tiny": {"family": "llava", "builder": "milebench.infer.tiny:build_tiny_llava"}}

The declarations are read from the module's source with ``ast`` and never imported: specs are validated
by every CLI call and in images without torch, and an adapter module imports its model libraries. The
adapter class and the tiny builder are imported only when a model is run or built.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import re
import tokenize
from functools import cache
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from milebench.errors import KitError
from milebench.plugins import registered
from milebench.spec.base import Spec, SpecError, field_errors

ENTRY_POINTS = "milebench.adapters"
"""The entry point group an adapter family registers in: ``kind = "module:Class"``."""
DECLARATION = "ADAPTER"
UNPORTED = "unported"
"""The adapter of models that need their original code base: a kind no entry point may register."""

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


class BadAdapter(KitError):
    """An entry point of the group that names no declared adapter, or none at all (the kit's package
    metadata missing or stale): named, with what fixes it."""

    exit_status = 2


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


def _through_statement(text: str, name: str) -> str | None:
    """``text`` up to the end of the statement its first line-leading ``name =`` starts, the module's
    header where the declaration sits; None where no such statement is found."""
    found = re.compile(rf"^{name}\s*=(?!=)", re.MULTILINE).search(text)
    if found is None:
        return None
    rest = text[found.start() :]
    try:
        for token in tokenize.generate_tokens(io.StringIO(rest).readline):
            if token.type == tokenize.NEWLINE:
                row, column = token.end
                line_start = 0
                for _ in range(row - 1):
                    line_start = rest.index("\n", line_start) + 1
                return text[: found.start() + line_start + column]
    except (tokenize.TokenError, SyntaxError):  # not a statement's start (inside a string, say)
        return None
    return None


def _assigned(module: ast.Module, name: str) -> ast.expr | None:
    """The value of the first module-level ``name = ...``; None when there is none."""
    for node in module.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == name
        ):
            return node.value
    return None


def module_literal(path: Path, text: str, name: str) -> object | None:
    """The value of the module-level ``name = ...`` in ``text``; None when there is none.

    Every job validates specs against the declarations, so only the module's header through the
    declaration is parsed, a fraction of the module; all of it where that header is no valid module or
    holds no declaration (the line found was inside a string)."""
    header = _through_statement(text, name)
    node = None
    if header is not None:
        with contextlib.suppress(SyntaxError):
            node = _assigned(ast.parse(header, filename=str(path)), name)
    if node is None:
        node = _assigned(ast.parse(text, filename=str(path)), name)
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise SpecError(path, [(name, "must be a literal (no names, calls or f-strings)")]) from None


def declarations_in(path: Path) -> list[AdapterDeclaration]:
    """What the module at ``path`` declares in its literal ``ADAPTER`` (one declaration or a list)."""
    text = path.read_text(encoding="utf-8")
    if f"{DECLARATION} =" not in text:  # most modules: skip parsing
        return []
    value = module_literal(path, text, DECLARATION)
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    found = []
    for i, item in enumerate(items):
        try:
            found.append(AdapterDeclaration.model_validate(item))
        except ValidationError as err:
            where = DECLARATION if len(items) == 1 and not isinstance(value, list) else f"{DECLARATION}.{i}"
            raise SpecError(
                path, [(f"{where}.{field}", message) for field, message in field_errors(err)]
            ) from None
    return found


def _source(point: EntryPoint) -> tuple[str, str, Path]:
    """The module, class and source file an entry point names, found without importing the module."""
    module, sep, name = point.value.partition(":")
    if not sep or not re.fullmatch(TARGET, point.value):
        raise BadAdapter(f"{_named(point)}: not `module:Class`")
    try:
        found = importlib.util.find_spec(module)
    except ImportError as err:
        raise BadAdapter(f"{_named(point)}: its package cannot be imported ({err})") from None
    if found is None or found.origin is None or not found.origin.endswith(".py"):
        raise BadAdapter(f"{_named(point)}: no module {module!r} with a source file is installed")
    return module, name, Path(found.origin)


def _named(point: EntryPoint) -> str:
    return f"entry point {point.name} = {point.value!r} of group {ENTRY_POINTS}"


def _registered(point: EntryPoint, read: dict[Path, list[AdapterDeclaration]]) -> DeclaredAdapter:
    """The declaration an entry point registers: its module's ``ADAPTER`` of that kind and class (each
    module read once into ``read``, though it may declare several kinds)."""
    module, name, path = _source(point)
    if path not in read:
        read[path] = declarations_in(path)
    for declaration in read[path]:
        if declaration.kind == point.name and declaration.entry == name:
            return DeclaredAdapter(module=module, path=path, declaration=declaration)
    raise SpecError(
        path, [(DECLARATION, f"declares no kind {point.name!r} of class {name!r} ({_named(point)})")]
    )


@cache
def declared_adapters() -> dict[str, DeclaredAdapter]:
    """Every registered adapter by kind, from the entry points of :data:`ENTRY_POINTS` (read, never
    imported); a kind registered twice, or ``unported``, is refused."""
    found: dict[str, DeclaredAdapter] = {}
    values: dict[str, str] = {}
    read: dict[Path, list[AdapterDeclaration]] = {}
    for point in sorted(registered(ENTRY_POINTS), key=lambda p: (p.name, p.value)):
        if point.name == UNPORTED or point.name in found:
            other = f"also registered as {values[point.name]!r}" if point.name in found else "reserved"
            raise BadAdapter(f"{_named(point)}: {point.name!r} is {other}")
        found[point.name] = _registered(point, read)
        values[point.name] = point.value
    if not found:
        raise BadAdapter(
            f"no adapter among the entry points of group {ENTRY_POINTS}: the kit's package metadata is "
            "missing or stale; reinstall the kit (pip install -e .)"
        )
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
