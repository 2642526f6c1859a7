"""lock-weights pins every open hub revision and nothing else; the result passes the lock's own checks."""

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from milebench.benchmarks.milebench.data.lock_weights import resolve_revisions
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.spec.model import UrlWeights
from milebench.spec.weights_lock import check_weights_lock, hub_part


@dataclass
class Info:
    sha: str | None


class FakeHub:
    def __init__(self, sha: str | None = "a" * 40) -> None:
        self.calls: list[tuple[str, str | None]] = []
        self.sha = sha

    def model_info(self, repo_id: str, revision: str | None = None) -> Info:
        self.calls.append((repo_id, revision))
        return Info(self.sha)


def test_resolves_exactly_the_open_hub_revisions(tmp_path) -> None:
    specs = load_specs()
    hub = FakeHub()
    lock = resolve_revisions(specs.models, hub, ref="v1")
    open_hub = {
        name
        for name, m in specs.models.items()
        if (part := hub_part(m)) is not None and part.revision is None
    }
    assert open_hub and set(lock.revisions) == open_hub
    assert all(ref == "v1" for _, ref in hub.calls)
    check_weights_lock(lock, specs.models, tmp_path / "weights.lock.yaml")


def test_missing_commit_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no commit"):
        resolve_revisions(load_specs().models, FakeHub(sha=None))


def test_unreachable_hub_is_a_clear_error_not_a_traceback(monkeypatch, caplog) -> None:
    import huggingface_hub

    from milebench import cli
    from milebench.hub import hub_errors

    network_error = hub_errors()[-1]

    class DownHub:
        def model_info(self, repo_id: str, revision: str | None = None) -> Info:
            raise network_error("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "HfApi", DownHub)
    assert cli.main(["lock-weights"]) == 1
    first = min(
        n for n, m in load_specs().models.items() if (hub := hub_part(m)) is not None and hub.revision is None
    )
    hub = hub_part(load_specs().models[first])
    assert hub is not None
    repo = hub.repo_id
    assert (
        f"cannot resolve model revisions on the hub: {first} ({repo} at 'main'): "
        f"{network_error.__name__}: Name or service not known"
    ) in caplog.text
    assert "Traceback" not in caplog.text


def test_the_command_writes_the_lock_into_the_specs_folder_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub
    import yaml

    from milebench import cli
    from milebench.spec.folder import DEFAULT_SPECS

    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeHub)
    # Url weight files already in the weights cache are hashed where they lie, never downloaded.
    monkeypatch.setenv("MILEBENCH_WEIGHTS", str(tmp_path / "weights"))
    for name, model in load_specs(specs).models.items():
        if isinstance(model.weights, UrlWeights):
            for file in model.weights.files:
                (tmp_path / "weights" / name).mkdir(parents=True, exist_ok=True)
                (tmp_path / "weights" / name / file.name).write_bytes(file.name.encode())
    assert cli.main(["--specs", str(specs), "lock-weights"]) == 0
    written = yaml.safe_load((specs / "locks" / "weights.lock.yaml").read_text())
    expected = resolve_revisions(load_specs(specs).models, FakeHub())
    assert list(written) == list(expected.model_dump())
    assert list(written["revisions"].items()) == list(expected.revisions.items())
    assert set(written["revisions"].values()) == {"a" * 40}


def test_a_run_pins_its_own_models_and_keeps_the_other_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub
    import yaml

    from milebench import cli
    from milebench.spec.folder import DEFAULT_SPECS

    specs = tmp_path / "specs"
    shutil.copytree(DEFAULT_SPECS, specs)
    open_hub = sorted(
        n
        for n, m in load_specs().models.items()
        if (part := hub_part(m)) is not None and part.revision is None
    )
    ours, other = open_hub[0], open_hub[1]
    (specs / "runs" / "one.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "one",
                "description": "one model",
                "models": ["random", ours],
                "tasks": "all",
                "modes": ["multi-image"],
                "data": {"kind": "fixture"},
            }
        )
    )
    lock = specs / "locks" / "weights.lock.yaml"
    lock.write_text(yaml.safe_dump({"revisions": {other: "b" * 40, ours: "c" * 40}}))
    hub = FakeHub()
    monkeypatch.setattr(huggingface_hub, "HfApi", lambda: hub)
    assert cli.main(["--specs", str(specs), "lock-weights", "--run", "one"]) == 0
    part = hub_part(load_specs().models[ours])
    assert part is not None and hub.calls == [(part.repo_id, "main")]
    assert yaml.safe_load(lock.read_text())["revisions"] == {other: "b" * 40, ours: "a" * 40}
