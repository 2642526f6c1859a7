"""MileBench's bundle hooks (its ``bundles:`` declaration): a run's files, job records and image families;
its cells named in the manifest; re-scoring every archived cell; re-running chosen ones."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from milebench.archive.badges import Role
from milebench.archive.compare import read_json
from milebench.archive.hooks import Options, Rerun, RunContents, Stamp
from milebench.archive.manifest import BundleError, Manifest
from milebench.archive.workspace import Workspace
from milebench.benchmarks.milebench.archive.contents import (
    data_archives,
    provenance_records,
    run_files,
    weight_files,
)
from milebench.benchmarks.milebench.archive.rerun import archived_cells, cell_names, choose, plan
from milebench.benchmarks.milebench.paths import RunPaths
from milebench.benchmarks.milebench.spec.registry import load_specs
from milebench.containers.docker_runtime import default_model_cache
from milebench.stage_inputs import command, require

KIT_FAMILY = "kit"


class MileBenchBundles:
    recomputed: ClassVar[frozenset[str]] = frozenset({"scores", "aggregate.json", "verdict.json"})
    rescored: ClassVar[dict[Role, tuple[str, ...] | None]] = {
        Role.JUDGMENT: ("scorer", "sample_id"),
        Role.TASK_SCORE: None,
        Role.AGGREGATE: None,
        Role.VERDICT: None,
    }

    def contents(self, specs_root: Path, run: str, root: Path, options: Options) -> RunContents:
        specs = load_specs(specs_root)
        spec = specs.run(run)
        paths = RunPaths.for_run(spec, base=root)
        require(paths.report_html, "the run's report", command("report", run=run))
        records = provenance_records(paths)
        items = run_files(spec, paths)
        if options.with_data:
            items += data_archives(specs, spec, paths)
        if options.with_weights:
            cache = default_model_cache(os.environ)
            items += weight_files(specs, spec, paths, [r for _, r in records], cache)
        return RunContents(
            items=items,
            stamps=[Stamp.of(path, record) for path, record in records],
            families=sorted({KIT_FAMILY} | {m.container for m in specs.run_models(spec) if m.container}),
            title="MileBench",
        )

    def check_manifest(self, manifest: Manifest) -> None:
        for e in manifest.files:
            if e.role is Role.PREDICTION:
                cell_names(e.path)

    def rescore_commands(self, ws: Workspace) -> list[list[str]]:
        """Re-render the report from the archived scores, re-score every archived cell, re-aggregate with
        the archived settings."""
        path = ws.path_of(Role.AGGREGATE)
        settings = read_json(ws.archived(path))
        resamples, seed = (
            settings.get(k) if isinstance(settings, dict) else None for k in ("resamples", "seed")
        )
        if not (isinstance(resamples, int) and isinstance(seed, int)):
            raise BundleError(f"{path}: no integer resamples and seed: not an aggregate the kit writes")
        commands = [ws.command("report", root=ws.render_root)]
        commands += [
            ws.command("score", "--model", c.model, "--task", c.task, "--mode", str(c.mode))
            for c in archived_cells(ws.manifest)
        ]
        commands.append(ws.command("aggregate", "--resamples", str(resamples), "--seed", str(seed)))
        return commands

    def fetch_commands(self, ws: Workspace) -> list[list[str]]:
        return [ws.command("fetch")]

    def reruns(self, ws: Workspace, chosen: list[str], per_model: int, seed: int) -> list[Rerun]:
        return plan(ws, load_specs(ws.specs), choose(ws.manifest, chosen, per_model, seed))


BUNDLES = MileBenchBundles()
