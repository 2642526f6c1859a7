"""Fuzzed spec files of every kind: loading gives a spec or a SpecError, never another exception, and
``milebench check-specs`` answers a broken file with exit code 2 and one error naming it, no traceback."""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from milebench.cli import main
from milebench.spec.base import SpecError, load_spec
from milebench.spec.benchmark import benchmarks
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.safe_yaml import MAX_DEPTH


def declared_kinds() -> dict[str, tuple[Path, type[BaseModel]]]:
    """Every benchmark's spec kinds as ``benchmark:kind``, each with a real file of it (relative to the
    shipped specs folder; fuzzed inputs start from its content) and its model."""
    found = {}
    for benchmark in benchmarks().values():
        for name, kind in benchmark.spec_kinds().items():
            where = benchmark.folder(DEFAULT_SPECS) / kind.files
            path = min(where.glob("*.yaml")) if kind.files.endswith("/") else where
            found[f"{benchmark.name}:{name}"] = (path.relative_to(DEFAULT_SPECS), kind.spec_model())
    return found


DECLARED = declared_kinds()
REAL_FILES = {name: path for name, (path, _) in DECLARED.items()}
MODELS = {name: model for name, (_, model) in DECLARED.items()}
KINDS = sorted(DECLARED)

FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def real_bytes(kind: str) -> bytes:
    return (DEFAULT_SPECS / REAL_FILES[kind]).read_bytes()


@st.composite
def mutated(draw: st.DrawFn, kind: str) -> bytes:
    """The real spec with one field, at any depth, replaced by a value of any type, removed or added."""
    data = copy.deepcopy(yaml.safe_load(real_bytes(kind)))
    node = data
    while isinstance(node, (dict, list)) and node:
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        if isinstance(node[key], (dict, list)) and node[key] and draw(st.booleans()):
            node = node[key]
            continue
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            node[key] = draw(values)
        elif action == "remove":
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=8))] = draw(values)
        else:
            node.append(draw(values))
        break
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False).encode()


@st.composite
def spliced(draw: st.DrawFn, kind: str) -> bytes:
    """The real spec's bytes with random bytes inserted anywhere (broken UTF-8, control characters)."""
    raw = real_bytes(kind)
    at = draw(st.integers(0, len(raw)))
    return raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]


@st.composite
def duplicated_key(draw: st.DrawFn, kind: str) -> bytes:
    """The real spec with one of its top-level ``key: value`` lines repeated at the end."""
    lines = [ln for ln in real_bytes(kind).splitlines() if ln[:1].isalpha() and b":" in ln]
    return real_bytes(kind) + b"\n" + draw(st.sampled_from(lines)) + b"\n"


@st.composite
def deep(draw: st.DrawFn) -> bytes:
    """Nesting around the depth guard and far beyond Python's recursion limit, flow or block style."""
    depth = draw(st.integers(MAX_DEPTH - 2, 6000))
    style = draw(st.sampled_from(["list", "map", "block"]))
    if style == "list":
        return b"[" * depth + b"]" * depth
    if style == "map":
        return b"{a: " * depth + b"1" + b"}" * depth
    depth = min(depth, 300)
    return "\n".join(" " * i + "a:" for i in range(depth)).encode() + b" 1\n"


def documents(kind: str) -> st.SearchStrategy[bytes | None]:
    return st.one_of(
        mutated(kind),
        mutated(kind),
        spliced(kind),
        duplicated_key(kind),
        deep(),
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        values.map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode()),
        st.none(),  # a folder named like the spec file
    )


def put(path: Path, document: bytes | None) -> None:
    """Write the document at ``path``, or make ``path`` a folder (holding a valid-looking spec)."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if document is None:
        path.mkdir()
        (path / "inner.yaml").write_bytes(b"name: inner\n")
    else:
        path.write_bytes(document)


@given(kind=st.sampled_from(KINDS), data=st.data())
@FUZZ
def test_loading_any_file_gives_a_spec_or_a_spec_error(
    kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / REAL_FILES[kind].name
    put(path, data.draw(documents(kind)))
    try:
        load_spec(path, MODELS[kind])
    except SpecError as err:
        assert err.path == path
        assert err.problems and str(err).startswith(f"{path}: ")


@pytest.fixture(scope="module")
def specs_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-cli") / "specs"
    shutil.copytree(DEFAULT_SPECS, root)
    return root


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """Everything the command prints or logs, as a user would see it on the terminal."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logging.getLogger().addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            yield out
    finally:
        logging.getLogger().removeHandler(handler)


@given(kind=st.sampled_from(KINDS), data=st.data())
@settings(FUZZ, max_examples=50)
def test_check_specs_cli_on_any_file(specs_copy: Path, kind: str, data: st.DataObject) -> None:
    """A file that does not load makes the command exit 2 with the file named; no traceback ever."""
    path = specs_copy / REAL_FILES[kind]
    try:
        put(path, data.draw(documents(kind)))
        try:
            load_spec(path, MODELS[kind])
            loads = True
        except SpecError:
            loads = False
        with captured() as out:
            rc = main(["check-specs", "--specs", str(specs_copy)])
        assert rc in (0, 2)
        if not loads:
            assert rc == 2 and f"{path}: " in out.getvalue()
        if rc == 2:
            assert "invalid spec" in out.getvalue()
        assert "Traceback" not in out.getvalue()
    finally:
        put(path, real_bytes(kind))
