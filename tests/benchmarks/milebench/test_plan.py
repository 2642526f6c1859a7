"""The run plan decides which cells exist; the adversarial mode must skip tasks without an adversarial set."""

from milebench.benchmarks.milebench.plan import cells, task_modes
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.benchmarks.milebench.spec.run import Mode


def test_paper_plan_covers_every_model_task_and_mode() -> None:
    specs = load_specs()
    run = specs.run("paper")
    pairs = task_modes(specs, run)
    adversarial = [p.task for p in pairs if p.mode is Mode.ADVERSARIAL]
    assert len([p for p in pairs if p.mode is Mode.MULTI_IMAGE]) == 29
    assert len(adversarial) == 26
    assert not {"TextNeedleInAHaystack", "ImageNeedleInAHaystack", "GPR1200"} & set(adversarial)
    assert len(cells(specs, run)) == len(run.models) * (29 + 29 + 26)


def test_smoke_plan_is_multi_image_only() -> None:
    specs = load_specs()
    run = specs.run("smoke")
    assert {c.mode for c in cells(specs, run)} == {Mode.MULTI_IMAGE}
    assert {c.model for c in cells(specs, run)} == set(run.models)
