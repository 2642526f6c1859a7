"""A YAML parser for spec files that turns every way a document can be wrong into a ``yaml.YAMLError``.

``yaml.safe_load`` silently keeps the last of two equal keys, recurses once per nesting level (a deep
document ends in ``RecursionError``) and lets a bad value under an explicit tag (``!!int x``,
``!!bool x``, an impossible date) escape as ``ValueError``/``KeyError``. Each of these is refused here
with the line where it happens, so the loader can report it like any syntax error.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode

MAX_DEPTH = 50
"""Deepest nesting of collections a spec may have; the real specs need fewer than ten levels."""

MERGE_TAG = "tag:yaml.org,2002:merge"


class SpecLoader(yaml.SafeLoader):
    """SafeLoader refusing duplicate keys, nesting deeper than ``MAX_DEPTH`` and bad tagged values."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: object) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", mark)
            # PyYAML's stubs say int; a mapping passes its key node, or None, as the index
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        finally:
            self._depth -= 1

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: set[object] = set()
            for key_node, _ in node.value:
                if key_node.tag == MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    duplicate = key in seen
                except TypeError:  # unhashable: the base constructor names it
                    continue
                if duplicate:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
            kind = node.tag.removeprefix("tag:yaml.org,2002:")
            value = f": {node.value!r}" if isinstance(node, ScalarNode) else ""
            raise ConstructorError(None, None, f"not a valid {kind}{value}", node.start_mark) from None


def parse_yaml(text: str) -> object:
    """Parse one YAML document with ``SpecLoader``; every problem is a ``yaml.YAMLError``."""
    loader = SpecLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
