"""Adapter families are found where they live: one module with a literal ``ADAPTER`` adds a family.

Each test runs Python on a copy of the package with one module added, so it checks that nothing but
that module needs editing (no list elsewhere names the kinds).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from package_copy import package_with, run_with

from milebench.spec.adapters import AdapterDeclaration, _declared_in, declared
from milebench.spec.base import SpecError

ADAPTER_LITERAL = {
    "kind": "toy-echo",
    "does": "generate",
    "entry": "ToyEchoAdapter",
    "environment": ["TOY_ECHO_KEY"],
    "execution": "generic",
    "tiny": {"family": "toy", "builder": "milebench.infer.toy_echo:build_tiny_toy"},
}
"""The literal ``TOY_MODULE`` declares."""

TOY_BODY = """

class ToyEchoAdapter:
    def __init__(self, spec, paths, data_root):
        self.spec = spec


def build_tiny_toy(spec, out_dir: Path) -> None:
    out_dir.mkdir(parents=True)
    (out_dir / "config.json").write_text("{}")
"""


def toy_module(adapter: dict[str, object]) -> str:
    """A family the kit never shipped, declaring ``adapter`` as a literal ``ADAPTER``."""
    header = '"""A family the kit never shipped: answers every prompt with its own name."""\n\n'
    return header + f"from pathlib import Path\n\nADAPTER = {adapter!r}\n" + TOY_BODY


TOY_MODULE = toy_module(ADAPTER_LITERAL)


TOY_SPEC = {
    "name": "toy",
    "display_name": "Toy",
    "section": "kit",
    "adapter": "toy-echo",
    "weights": {"kind": "tiny", "family": "toy"},
    "notes": "a test family",
}


def run_python(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    return run_with(root, ["-c", textwrap.dedent(code)])


def test_a_new_adapter_module_is_a_new_family_without_editing_anything_else(tmp_path: Path) -> None:
    root = package_with(tmp_path, {"infer/toy_echo.py": TOY_MODULE})
    done = run_python(
        root,
        f"""
        import json, sys
        from pathlib import Path
        from milebench.spec.model import ModelSpec
        spec = ModelSpec.model_validate({TOY_SPEC!r})
        torch_loaded = "torch" in sys.modules
        from milebench.spec.execution import GENERIC
        from milebench.spec.model_execution import execution_of
        from milebench.infer.registry import adapter_class, adapter_environment
        from milebench.infer.tiny import build_tiny
        build_tiny(spec, Path("tiny"))
        print(json.dumps({{
            "torch_loaded": torch_loaded,
            "class": adapter_class(spec).__name__,
            "environment": list(adapter_environment(spec)),
            "generic": execution_of(spec) is GENERIC,
            "built": Path("tiny/config.json").is_file(),
            "schema": ModelSpec.model_json_schema()["$defs"]["AdapterKind"]["enum"],
        }}))
        """,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["torch_loaded"] is False  # specs validate in images without torch
    assert found["class"] == "ToyEchoAdapter"
    assert found["environment"] == ["TOY_ECHO_KEY"]
    assert found["generic"] and found["built"]
    assert "toy-echo" in found["schema"] and "unported" in found["schema"]


def test_an_unknown_kind_is_refused_naming_the_known_ones(tmp_path: Path) -> None:
    root = package_with(tmp_path, {"infer/toy_echo.py": TOY_MODULE})
    done = run_python(
        root,
        f"""
        from milebench.spec.base import validate_mapping
        from milebench.spec.model import ModelSpec
        validate_mapping("models/toy.yaml", {{**{TOY_SPEC!r}, "adapter": "toy-echoes"}}, ModelSpec)
        """,
    )
    assert done.returncode != 0
    assert "models/toy.yaml: adapter: Input should be" in done.stderr
    assert "'toy-echo'" in done.stderr and "'hf-llava'" in done.stderr and "'unported'" in done.stderr


def test_a_bad_declaration_names_its_file_and_field(tmp_path: Path) -> None:
    bad = toy_module({**ADAPTER_LITERAL, "colour": "red"})
    root = package_with(tmp_path, {"infer/toy_echo.py": bad})
    done = run_python(root, "import milebench.spec.model")
    assert done.returncode != 0
    assert "infer/toy_echo.py: ADAPTER.colour: Extra inputs are not permitted" in done.stderr


def test_a_kind_declared_twice_names_both_modules(tmp_path: Path) -> None:
    twice = toy_module({**ADAPTER_LITERAL, "kind": "hf-llava"})
    root = package_with(tmp_path, {"infer/toy_echo.py": twice})
    done = run_python(root, "import milebench.spec.model")
    assert done.returncode != 0
    assert "ADAPTER.kind: 'hf-llava' is also declared in" in done.stderr
    assert "hf_llava.py" in done.stderr and "toy_echo.py" in done.stderr


# The same rules in this process, on a module written to a folder: what one module's ``ADAPTER`` declares.


def write_module(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_module_s_literal_declares_an_adapter_of_that_module(tmp_path: Path) -> None:
    module = write_module(tmp_path, "infer/toy_echo.py", TOY_MODULE)
    [found] = _declared_in(tmp_path, module)
    assert (found.module, found.path, found.target) == (
        "milebench.infer.toy_echo",
        module,
        "milebench.infer.toy_echo:ToyEchoAdapter",
    )
    assert found.declaration == AdapterDeclaration.model_validate(ADAPTER_LITERAL)
    package = write_module(tmp_path, "infer/toy/__init__.py", TOY_MODULE)
    assert [d.module for d in _declared_in(tmp_path, package)] == ["milebench.infer.toy"]


def test_only_a_single_name_assigned_a_literal_declares(tmp_path: Path) -> None:
    none = write_module(tmp_path, "a.py", "ADAPTER = None\n")
    chained = write_module(tmp_path, "b.py", f"ADAPTER = OTHER = {ADAPTER_LITERAL!r}\n")
    mentioned = write_module(tmp_path, "c.py", '"""Declares no ADAPTER = here."""\n')
    assert [_declared_in(tmp_path, p) for p in (none, chained, mentioned)] == [[], [], []]


def test_a_bad_declaration_in_a_list_names_its_index_and_field(tmp_path: Path) -> None:
    bad = {**ADAPTER_LITERAL, "kind": "toy-two", "colour": "red"}
    single = write_module(tmp_path, "single.py", f"ADAPTER = {bad!r}\n")
    listed = write_module(tmp_path, "listed.py", f"ADAPTER = [{ADAPTER_LITERAL!r}, {bad!r}]\n")
    one = write_module(tmp_path, "one.py", f"ADAPTER = [{bad!r}]\n")
    for path, field in ((single, "ADAPTER.colour"), (listed, "ADAPTER.1.colour"), (one, "ADAPTER.0.colour")):
        with pytest.raises(SpecError) as err:
            _declared_in(tmp_path, path)
        assert str(err.value) == f"{path}: {field}: Extra inputs are not permitted"


def test_a_kind_s_declaration_is_found_where_its_module_lives() -> None:
    found = declared("hf-llava")
    assert found is not None and found.target == "milebench.infer.hf_llava:HfLlavaAdapter"
    assert declared("unported") is None and declared("no-such-kind") is None
