"""``milebench validate-data``: check an extracted ``MileBench/`` tree against the task specs.

Every problem names its task JSON and the field or sample it concerns, so a broken download or a broken
fixture is found before any model runs on it; an image entry that leads outside its task folder (``..``,
an absolute path, a symlink) is one of them.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from milebench.benchmarks.milebench.data.images import IMAGE_FOLDERS, outside, task_image
from milebench.benchmarks.milebench.data.schema import Sample, TaskFile, quantity_level, task_json_path
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.task import QuestionType, TaskSpec
from milebench.spec.base import field_path
from milebench.stage_inputs import command as command_line
from milebench.stage_inputs import require

log = logging.getLogger(__name__)

PLACEHOLDER = re.compile(r"\{(image|table)#(\d+)\}")


@dataclass(frozen=True)
class Problem:
    """One finding; ``file`` is relative to the data root, ``where`` a field path or ``sample <id>``."""

    task: str
    file: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.where}: {self.message}"


def validate_tree(
    data_root: Path, tasks: Iterable[TaskSpec], expected_samples: int | None = None
) -> list[Problem]:
    """All problems of the tree under ``data_root`` (the ``MileBench/`` folder); empty when it is sound.

    ``expected_samples`` replaces each spec's ``n_samples`` (fixtures hold fewer samples).
    """
    data_root = Path(data_root)
    problems: list[Problem] = []
    for spec in tasks:
        problems += _validate_task(data_root, spec, expected_samples)
    return problems


def _validate_task(data_root: Path, spec: TaskSpec, expected_samples: int | None) -> list[Problem]:
    task_dir = data_root / spec.name
    if not task_dir.is_dir():
        return [Problem(spec.name, spec.name, "<folder>", f"task folder missing under {data_root}")]
    expected = spec.n_samples if expected_samples is None else expected_samples
    main_file, problems = _validate_file(data_root, spec, adversarial=False)
    if main_file is not None and len(main_file.data) != expected:
        problems.append(_problem(spec, False, "data", f"{len(main_file.data)} samples, expected {expected}"))

    adv_path = data_root / task_json_path(spec.name, adversarial=True)
    if spec.has_adversarial:
        adv_file, adv_problems = _validate_file(data_root, spec, adversarial=True)
        problems += adv_problems
        if adv_file is not None and main_file is not None and len(adv_file.data) != len(main_file.data):
            message = f"{len(adv_file.data)} samples, the test set has {len(main_file.data)}"
            problems.append(_problem(spec, True, "data", message))
    elif adv_path.exists():
        problems.append(_problem(spec, True, "<file>", "adversarial file present but the spec has none"))
    return problems


def _problem(spec: TaskSpec, adversarial: bool, where: str, message: str) -> Problem:
    return Problem(spec.name, task_json_path(spec.name, adversarial), where, message)


def _validate_file(
    data_root: Path, spec: TaskSpec, adversarial: bool
) -> tuple[TaskFile | None, list[Problem]]:
    path = data_root / task_json_path(spec.name, adversarial)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, [_problem(spec, adversarial, "<file>", "file not found")]
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, [_problem(spec, adversarial, "<file>", f"invalid JSON: {err}")]
    try:
        task_file = TaskFile.model_validate(raw)
    except ValidationError as err:
        return None, [_problem(spec, adversarial, field_path(e["loc"]), e["msg"]) for e in err.errors()]

    problems = []
    if task_file.meta_data.question_type is not spec.question_type:
        message = f"{task_file.meta_data.question_type.value!r}, the spec says {spec.question_type.value!r}"
        problems.append(_problem(spec, adversarial, "meta_data.question_type", message))
    ids = Counter(sample.sample_id for sample in task_file.data)
    problems += [
        _problem(spec, adversarial, f"sample {sid}", f"sample_id used {count} times")
        for sid, count in sorted(ids.items())
        if count > 1
    ]
    n_instructions = len(task_file.meta_data.task_instruction)
    for sample in task_file.data:
        where = f"sample {sample.sample_id}"
        problems += [
            _problem(spec, adversarial, where, message)
            for message in _sample_messages(data_root / spec.name, spec, sample, n_instructions)
        ]
    return task_file, problems


def _sample_messages(task_dir: Path, spec: TaskSpec, sample: Sample, n_instructions: int) -> list[str]:
    messages = []
    instance = sample.task_instance
    if sample.task_instruction_id >= n_instructions:
        messages.append(
            f"task_instruction_id {sample.task_instruction_id} out of range "
            f"(meta_data.task_instruction has {n_instructions})"
        )
    if spec.question_type is QuestionType.MULTI_CHOICE:
        if not instance.choice_list:
            messages.append("task_instance.choice_list missing for a multi-choice task")
        elif sample.response not in instance.choice_list:
            messages.append(f"response {sample.response!r} is not one of task_instance.choice_list")
    n_images = len(instance.images_path)
    for kind, index in PLACEHOLDER.findall(instance.context):
        if not 1 <= int(index) <= n_images:
            messages.append(f"placeholder {{{kind}#{index}}} in context but images_path has {n_images}")
    level = quantity_level(n_images)
    if sample.image_quantity_level != level:
        messages.append(
            f"image_quantity_level {sample.image_quantity_level} but {n_images} images is {level}"
        )
    for field in IMAGE_FOLDERS:
        for name in getattr(instance, field):
            refusal = outside(task_dir, field, name)
            if refusal is not None:
                messages.append(refusal)
                continue
            rel = task_image(spec.name, field, name)
            if not (task_dir.parent / rel).is_file():
                messages.append(f"file {rel} not found")
    return messages


def command(args: argparse.Namespace) -> int:
    """Log each problem on its own line; exit 1 if there is any."""
    tasks = list(load_specs(args.specs).tasks.values())
    require(args.data_root, "MileBench data folder", command_line("fetch", run="<run>"))
    problems = validate_tree(args.data_root, tasks, args.samples_per_task)
    for problem in problems:
        log.error("%s", problem)
    if problems:
        log.error("%d problems in %s", len(problems), args.data_root)
        return 1
    log.info("OK: %s matches the %d task specs", args.data_root, len(tasks))
    return 0
