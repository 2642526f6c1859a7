"""Adapter families are found where they live: one module with a literal ``ADAPTER`` adds a family.

Each test runs Python on a copy of the package with one module added, so it checks that nothing but
that module needs editing (no list elsewhere names the kinds).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

from package_copy import package_with, run_with

TOY_MODULE = '''
"""A family the kit never shipped: answers every prompt with its own name."""

from pathlib import Path

ADAPTER = {
    "kind": "toy-echo",
    "does": "generate",
    "entry": "ToyEchoAdapter",
    "environment": ["TOY_ECHO_KEY"],
    "execution": "generic",
    "tiny": {"family": "toy", "builder": "milebench.infer.toy_echo:build_tiny_toy"},
}


class ToyEchoAdapter:
    def __init__(self, spec, paths, data_root):
        self.spec = spec


def build_tiny_toy(spec, out_dir: Path) -> None:
    out_dir.mkdir(parents=True)
    (out_dir / "config.json").write_text("{}")
'''

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
        from milebench.spec.execution import GENERIC, execution_of
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
    bad = TOY_MODULE.replace('"does": "generate",', '"does": "generate", "colour": "red",')
    root = package_with(tmp_path, {"infer/toy_echo.py": bad})
    done = run_python(root, "import milebench.spec.model")
    assert done.returncode != 0
    assert "infer/toy_echo.py: ADAPTER.colour: Extra inputs are not permitted" in done.stderr


def test_a_kind_declared_twice_names_both_modules(tmp_path: Path) -> None:
    twice = TOY_MODULE.replace('"kind": "toy-echo"', '"kind": "hf-llava"')
    root = package_with(tmp_path, {"infer/toy_echo.py": twice})
    done = run_python(root, "import milebench.spec.model")
    assert done.returncode != 0
    assert "ADAPTER.kind: 'hf-llava' is also declared in" in done.stderr
    assert "hf_llava.py" in done.stderr and "toy_echo.py" in done.stderr
