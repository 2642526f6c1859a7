"""A model family is a module, one entry point line and a spec: an installed distribution outside the kit
adds one, with its own prompt template, without editing any kit file, and the kit's own families are
registered the same way.

Each outside test writes a package ``toyfam`` and its distribution metadata into a folder put on
PYTHONPATH (as pip installs a wheel beside the kit), and runs Python there.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml
from package_copy import PACKAGE, run_with

from milebench.infer.adapter import AdapterError
from milebench.infer.registry import template_renderer
from milebench.spec.adapters import (
    DECLARATION,
    ENTRY_POINTS,
    adapter_kinds,
    declarations_in,
    declared,
    declared_adapters,
)
from milebench.spec.base import SpecError
from milebench.spec.folder import DEFAULT_SPECS
from milebench.spec.templates import SHARED, declared_templates, templates_in

ADAPTER_LITERAL = {
    "kind": "toy-echo",
    "does": "generate",
    "entry": "ToyEchoAdapter",
    "environment": ["TOY_ECHO_KEY"],
    "execution": "generic",
    "tiny": {"family": "toy", "builder": "toyfam:build_tiny_toy"},
}
"""The literal the toy family's module declares."""

TEMPLATES_LITERAL = {"toy_turn": "The toy family's turn: the text between <toy> tags."}
"""The template the toy family's module declares beside its adapter."""

TOY_BODY = '''

def toy_turn(prompt):
    return f"<toy>{prompt}</toy>"


class ToyEchoAdapter:
    """Answers every sample with its own model's name and the sample's id, in the spec's prompt template
    where it states one."""

    version = "1"

    def __init__(self, spec, paths, data_root, *, policy=None):
        self.name = spec.name
        self.template = spec.execution.prompt_template if spec.execution else None

    def generate(self, samples):
        answers = [f"{self.name}:{s.sample_id}" for s in samples]
        if self.template is None:
            return answers
        from milebench.infer.registry import template_renderer

        return [template_renderer(self.template)(answer) for answer in answers]


def build_tiny_toy(spec, out_dir: Path) -> None:
    out_dir.mkdir(parents=True)
    (out_dir / "config.json").write_text("{}")
'''

TOY_SPEC = {
    "name": "toy",
    "display_name": "Toy",
    "section": "user",
    "adapter": "toy-echo",
    "weights": {"kind": "tiny", "family": "toy"},
    "notes": "a family from outside the kit",
}


TOY_TURN_SPEC = {
    **TOY_SPEC,
    "name": "toy-turn",
    "display_name": "Toy turn",
    "execution": {"prompt_template": "toy_turn", "source": "the toy family's own turn"},
}
"""A model of the toy family run in the template the family brings."""


def toy_module(adapter: dict[str, object], templates: dict[str, str] = TEMPLATES_LITERAL) -> str:
    """A family the kit never shipped, declaring ``adapter`` as a literal ``ADAPTER`` and ``templates`` as
    a literal ``TEMPLATES``."""
    header = '"""A family the kit never shipped."""\n\nfrom pathlib import Path\n\n'
    return f"{header}ADAPTER = {adapter!r}\nTEMPLATES = {templates!r}\n{TOY_BODY}"


def toy_distribution(
    tmp_path: Path, module: str, entry_point: str = "toy-echo = toyfam:ToyEchoAdapter"
) -> Path:
    """A folder for PYTHONPATH holding ``toyfam`` and its metadata, with one entry point line of
    group milebench.adapters."""
    site = tmp_path / "site"
    (site / "toyfam").mkdir(parents=True)
    (site / "toyfam" / "__init__.py").write_text(module, encoding="utf-8")
    meta = site / "toyfam-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: toyfam\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[{ENTRY_POINTS}]\n{entry_point}\n")
    return site


def overlay(tmp_path: Path, *specs: dict[str, object]) -> Path:
    """A user's specs folder (no paper.yaml: an overlay of the kit's) holding model specs, each in the file
    of its name."""
    folder = tmp_path / "my-specs"
    (folder / "models").mkdir(parents=True)
    for spec in specs:
        (folder / "models" / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    return folder


def run_python(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    return run_with(site, ["-c", textwrap.dedent(code)], cwd=site.parent)


def test_a_family_outside_the_kit_is_found_validated_and_answers_a_sample(tmp_path: Path) -> None:
    """The family's module (its adapter and its template), its one entry point line and two specs: one in
    the generic execution, one in the family's own template."""
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL))
    specs = overlay(tmp_path, TOY_SPEC, TOY_TURN_SPEC)
    checked = run_with(site, ["-m", "milebench", "--specs", str(specs), "check-specs"])
    assert checked.returncode == 0, checked.stderr[-2000:]
    done = run_python(
        site,
        f"""
        import json, sys
        from pathlib import Path
        from milebench.benchmarks.milebench.spec.registry import load_specs
        loaded = load_specs(Path({str(specs)!r})).models
        spec, turn = loaded["toy"], loaded["toy-turn"]
        torch_loaded = "torch" in sys.modules
        from milebench.commands.specs import schema_text
        from milebench.spec.model import ModelSpec
        from milebench.spec.execution import GENERIC
        from milebench.spec.model_execution import execution_of
        from milebench.infer.engine import run_model
        from milebench.infer.registry import adapter_environment, load_adapter
        from milebench.infer.tiny import build_tiny
        from milebench.benchmarks.milebench.paths import RunPaths
        from milebench.benchmarks.milebench.records import PreparedSample
        sample = PreparedSample(
            task="WebQA", mode="multi-image", sample_id=7, instruction="Answer.", context="Which?",
            images=(), image_sha256=(), prompt_sha256="0" * 64, question_type="open-ended",
            choices=None, response="toy:7", image_quantity_level="Few", n_images=0,
        )
        paths = RunPaths(out=Path("out"), reports=Path("out"))
        run_model(load_adapter(spec, paths, Path(".")), spec, [sample], Path("p.jsonl"))
        run_model(load_adapter(turn, paths, Path(".")), turn, [sample], Path("turn.jsonl"))
        build_tiny(spec, Path("tiny"))
        print(json.dumps({{
            "torch_loaded": torch_loaded,
            "answer": json.loads(Path("p.jsonl").read_text().splitlines()[0])["response"],
            "turn_answer": json.loads(Path("turn.jsonl").read_text().splitlines()[0])["response"],
            "environment": list(adapter_environment(spec)),
            "generic": execution_of(spec) is GENERIC,
            "built": Path("tiny/config.json").is_file(),
            "schema": schema_text(ModelSpec),
        }}))
        """,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["torch_loaded"] is False  # specs validate in images without torch
    assert found["answer"] == "toy:7"
    assert found["turn_answer"] == "<toy>toy-turn:7</toy>"  # rendered by the function its module declares
    assert found["environment"] == ["TOY_ECHO_KEY"]
    assert found["generic"] and found["built"]
    committed = (DEFAULT_SPECS / "schemas" / "model.schema.json").read_text(encoding="utf-8")
    assert found["schema"] == committed  # a new family leaves the published schema as it is


def test_a_spec_naming_an_unknown_adapter_names_its_file_field_and_the_known_ones(tmp_path: Path) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL))
    specs = overlay(tmp_path, {**TOY_SPEC, "adapter": "toy-echoes"})
    done = run_with(site, ["-m", "milebench", "--specs", str(specs), "check-specs"])
    assert done.returncode == 2
    line = f"{specs / 'models' / 'toy.yaml'}: adapter: unknown adapter 'toy-echoes'; known: "
    assert line in done.stderr, done.stderr[-2000:]
    known = done.stderr.split(line)[1].splitlines()[0].split(", ")
    assert {"toy-echo", "hf-llava", "unported"} <= set(known)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("execution", "field"),
    [
        ({"prompt_template": "toy_turns"}, "execution.prompt_template"),
        (
            {"variants": {"other": {"description": "d", "prompt_template": "toy_turns"}}},
            "execution.variants.other.prompt_template",
        ),
    ],
)
def test_a_spec_naming_an_unknown_template_names_its_file_field_and_the_known_ones(
    tmp_path: Path, execution: dict[str, object], field: str
) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL))
    specs = overlay(tmp_path, {**TOY_SPEC, "execution": execution})
    done = run_with(site, ["-m", "milebench", "--specs", str(specs), "check-specs"])
    assert done.returncode == 2
    line = f"{specs / 'models' / 'toy.yaml'}: {field}: unknown prompt template 'toy_turns'; known: "
    assert line in done.stderr, done.stderr[-2000:]
    known = done.stderr.split(line)[1].splitlines()[0].split(", ")
    assert {"toy_turn", "chat_template", "llava_llama_2", "yi_mm_default"} <= set(known)
    assert "Traceback" not in done.stderr


def test_a_template_declared_twice_is_refused_naming_both_modules(tmp_path: Path) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL, {"plain": "The toy's own plain text."}))
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2
    assert f"{site / 'toyfam' / '__init__.py'}: TEMPLATES.plain: also declared by {SHARED}" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_tiny_family_is_named_with_the_known_ones(tmp_path: Path) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL))
    specs = overlay(tmp_path, {**TOY_SPEC, "weights": {"kind": "tiny", "family": "toys"}})
    done = run_with(site, ["-m", "milebench", "--specs", str(specs), "check-specs"])
    assert done.returncode == 2
    assert "weights.tiny.family: unknown tiny family 'toys'; known: " in done.stderr
    assert "toy, " in done.stderr.split("known: ")[1]


def test_a_bad_declaration_names_its_file_and_field(tmp_path: Path) -> None:
    site = toy_distribution(tmp_path, toy_module({**ADAPTER_LITERAL, "colour": "red"}))
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2
    assert f"{site / 'toyfam' / '__init__.py'}: ADAPTER.colour: Extra inputs are not permitted" in done.stderr


@pytest.mark.parametrize(
    ("entry_point", "message"),
    [
        ("hf-llava = toyfam:ToyEchoAdapter", "'hf-llava' is also registered as "),
        ("unported = toyfam:ToyEchoAdapter", "'unported' is reserved"),
        ("toy-echo = toyfam", "not `module:Class`"),
        ("toy-echo = toyfamily:ToyEchoAdapter", "no module 'toyfamily' with a source file is installed"),
    ],
)
def test_a_bad_entry_point_is_named(tmp_path: Path, entry_point: str, message: str) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL), entry_point)
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2
    name, value = (part.strip() for part in entry_point.split("="))
    assert f"entry point {name} = {value!r} of group {ENTRY_POINTS}: {message}" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_entry_point_its_module_does_not_declare_is_named(tmp_path: Path) -> None:
    site = toy_distribution(tmp_path, toy_module(ADAPTER_LITERAL), "toy-other = toyfam:ToyEchoAdapter")
    done = run_with(site, ["-m", "milebench", "check-specs"])
    assert done.returncode == 2
    assert (
        f"{site / 'toyfam' / '__init__.py'}: ADAPTER: declares no kind 'toy-other' of class 'ToyEchoAdapter'"
        in done.stderr
    )


# The same rules in this process, on a module written to a folder: what one module's ``ADAPTER`` declares.


def write_module(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_only_a_single_name_assigned_a_literal_declares(tmp_path: Path) -> None:
    none = write_module(tmp_path, "a.py", "ADAPTER = None\n")
    chained = write_module(tmp_path, "b.py", f"ADAPTER = OTHER = {ADAPTER_LITERAL!r}\n")
    mentioned = write_module(tmp_path, "c.py", '"""Declares no ADAPTER = here."""\n')
    assert [declarations_in(p) for p in (none, chained, mentioned)] == [[], [], []]


def test_a_declaration_shown_in_a_string_before_the_module_s_own_is_not_it(tmp_path: Path) -> None:
    shown = {**ADAPTER_LITERAL, "kind": "shown-only"}
    text = f'"""A family; its declaration reads:\n\nADAPTER = {shown!r}\n"""\n\nimport os\n\n'
    path = write_module(tmp_path, "shown.py", f"{text}ADAPTER = {ADAPTER_LITERAL!r}\n{TOY_BODY}")
    assert [d.kind for d in declarations_in(path)] == ["toy-echo"]


def test_a_bad_declaration_in_a_list_names_its_index_and_field(tmp_path: Path) -> None:
    bad = {**ADAPTER_LITERAL, "kind": "toy-two", "colour": "red"}
    single = write_module(tmp_path, "single.py", f"ADAPTER = {bad!r}\n")
    listed = write_module(tmp_path, "listed.py", f"ADAPTER = [{ADAPTER_LITERAL!r}, {bad!r}]\n")
    one = write_module(tmp_path, "one.py", f"ADAPTER = [{bad!r}]\n")
    for path, field in ((single, "ADAPTER.colour"), (listed, "ADAPTER.1.colour"), (one, "ADAPTER.0.colour")):
        with pytest.raises(SpecError) as err:
            declarations_in(path)
        assert str(err.value) == f"{path}: {field}: Extra inputs are not permitted"


def test_a_kind_s_declaration_is_found_where_its_module_lives() -> None:
    found = declared("hf-llava")
    assert found is not None and found.target == "milebench.infer.hf_llava:HfLlavaAdapter"
    assert declared("unported") is None and declared("no-such-kind") is None


def test_every_declaration_in_the_kit_is_registered() -> None:
    """A kit module that declares a family without its line in pyproject.toml would never run."""
    registered = {(d.module, d.declaration.kind) for d in declared_adapters().values()}
    for path in sorted(PACKAGE.rglob("*.py")):
        if f"{DECLARATION} =" not in path.read_text(encoding="utf-8"):
            continue
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        for declaration in declarations_in(path):
            assert (module, declaration.kind) in registered, f"{path}: {declaration.kind} not registered"


def test_a_bad_template_declaration_names_its_file_and_field(tmp_path: Path) -> None:
    cases = {
        "name.py": ("TEMPLATES = {'Toy-Turn': 'A turn.'}\n", "TEMPLATES.Toy-Turn.[key]: String should match"),
        "empty.py": ("TEMPLATES = {'toy_turn': ''}\n", "TEMPLATES.toy_turn: String should have at least 1"),
        "listed.py": ("TEMPLATES = ['toy_turn']\n", "TEMPLATES: Input should be a valid dictionary"),
        "named.py": ("TEMPLATES = {'toy_turn': DESCRIPTION}\n", "TEMPLATES: must be a literal"),
    }
    for name, (text, message) in cases.items():
        path = write_module(tmp_path, name, text)
        with pytest.raises(SpecError) as err:
            templates_in(path)
        assert str(err.value).startswith(f"{path}: {message}")


def test_each_template_is_declared_where_its_family_lives() -> None:
    found = declared_templates()
    assert {name: found[name].module for name in ("chat_template", "llava_llama_2", "yi_mm_default")} == {
        "chat_template": SHARED,
        "llava_llama_2": SHARED,
        "yi_mm_default": "milebench.infer.hf_yi_vl",
    }
    assert found["yi_mm_default"].description.startswith('Yi-VL\'s ``conv_templates["mm_default"]``')


def test_every_template_a_kit_adapter_supports_is_declared() -> None:
    """A template an adapter supports that no module declares could never pass a spec's validation."""
    names = set(declared_templates())
    for kind in adapter_kinds("generate"):
        module, _, name = declared_adapters()[kind].target.partition(":")
        adapter = getattr(importlib.import_module(module), name)
        supported = set(getattr(adapter, "supported", {}).get("prompt_template", ()))
        assert supported <= names, f"{kind}: {sorted(supported - names)}"


def test_a_template_its_adapter_renders_has_no_renderer_to_look_up() -> None:
    assert template_renderer("yi_mm_default")("Which?").endswith("### Human: Which?\n### Assistant:")
    with pytest.raises(AdapterError, match=f"'chat_template': {SHARED} declares it but has no function"):
        template_renderer("chat_template")
