"""MMLongEmbed's bundle hooks (its ``bundles:`` declaration): which files of a run go in, its job records,
the models its manifest names, re-scoring (evaluate, aggregate, report) and re-running an embedder.

A run's bundle holds its generated sets (queries, candidates, pools, qrels, pictures), each embedder's
query scores and what it read, the metrics, the analysis and the report; the embedding cache stays out
(``embed-run`` fills it again). Every job ran in the kit's image. Re-run embedders answer in it from the
bundled sets: BM25 must score every query exactly as archived. An embedder that runs on torch (the kit's
image holds none), or whose weights come from the hub or an API, is not re-run, and says why.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from pathlib import Path, PurePosixPath
from typing import ClassVar

from milebench.archive.badges import Role
from milebench.archive.compare import agreement, compare_rows
from milebench.archive.contents import PROVENANCE_SUFFIX, files_under, run_items
from milebench.archive.hooks import Options, Rerun, RunContents, Stamp
from milebench.archive.manifest import RUN_ROOT, BundleError, Manifest
from milebench.archive.workspace import Workspace
from milebench.benchmarks.mmlongembed.paths import EmbedPaths
from milebench.benchmarks.mmlongembed.provenance import read_provenance
from milebench.benchmarks.mmlongembed.spec import AnyEmbedder, ApiEmbedder, Bm25Model, load_embed_specs
from milebench.benchmarks.mmlongembed.tokenizer_spec import HubTokenizer
from milebench.spec.model import MODEL_NAME
from milebench.stage_inputs import require

log = logging.getLogger(__name__)

KIT_FAMILY = "kit"
SCORES = "runs"
ANSWER = ("scores",)
"""What a re-run embedder must reproduce for each query: every pool candidate's similarity."""


def model_of(name: str) -> str:
    """The embedder a file of ``runs/`` or ``metrics/`` belongs to (``<model>.jsonl``,
    ``<model>.inputs.jsonl``, ``<model>.json`` and their job records)."""
    base = name.removesuffix(PROVENANCE_SUFFIX)
    for suffix in (".inputs.jsonl", ".jsonl", ".json"):
        if base.endswith(suffix):
            return base.removesuffix(suffix)
    return base


def classify(rel: PurePosixPath, run: str) -> tuple[Role, str] | None:
    """Role and writing command of a file under ``results/<run>/``; None for what stays out."""
    parts, name = rel.parts, rel.name
    role_of = Role.PROVENANCE if name.endswith(PROVENANCE_SUFFIX) else None
    if parts[0] == "analysis.json" or parts == ("analysis.json" + PROVENANCE_SUFFIX,):
        return role_of or Role.AGGREGATE, f"milebench embed-aggregate --run {run}"
    if parts[0] == "vg":
        return role_of or Role.PREPARED, f"milebench embed-generate --run {run}"
    if parts[0] == "tasks" and len(parts) >= 3:
        return role_of or Role.PREPARED, f"milebench embed-pools --run {run} --dataset {parts[1]}"
    if parts[0] == SCORES and len(parts) == 2:
        return role_of or Role.PREDICTION, f"milebench embed-run --run {run} --model {model_of(name)}"
    if parts[0] == "metrics" and len(parts) == 2:
        return Role.TASK_SCORE, f"milebench embed-evaluate --run {run} --model {model_of(name)}"
    if parts[0] == "logs" and len(parts) == 3:
        return Role.LOG, f"snakemake rule {parts[1]} (log of {name.removesuffix('.log')})"
    return None


def stamps(paths: EmbedPaths) -> list[Stamp]:
    """Every job record of the run, read strictly: a bundle must not carry an unreadable one."""
    found = []
    for path in files_under(paths.out):
        if path.name.endswith(PROVENANCE_SUFFIX):
            try:
                record = read_provenance(path)
            except ValueError as err:
                raise BundleError(str(err)) from None
            found.append(Stamp.of(path, record))
    return found


def models_of(manifest: Manifest, role: Role) -> list[str]:
    """The embedders whose scores (``runs/<model>.jsonl``) or metrics the manifest lists."""
    suffix = ".jsonl" if role is Role.PREDICTION else ".json"
    names = (
        PurePosixPath(e.path).name
        for e in manifest.files
        if e.role is role and not e.path.endswith(".inputs.jsonl")
    )
    return sorted(name.removesuffix(suffix) for name in names)


def outside(model: AnyEmbedder) -> bool:
    """Its weights come from the hub or it is an API: nothing a bundle can carry."""
    return isinstance(model, ApiEmbedder) or (
        not isinstance(model, Bm25Model) and isinstance(model.weights, HubTokenizer)
    )


def skip_reason(model: AnyEmbedder) -> str | None:
    """Why ``model`` cannot re-run offline from the bundle; None when it can."""
    if isinstance(model, Bm25Model):
        return None
    if isinstance(model, ApiEmbedder):
        return "an API embedder needs the network"
    if outside(model):
        return "its hub weights are not in the bundle (MMLongEmbed bundles no hub weights)"
    return "it runs on torch, which the kit's image it would re-run in does not hold"


def judge(ws: Workspace, model: str) -> tuple[list[str], str]:
    """(problems, evidence line) of one re-run embedder: only deterministic ones are re-run."""
    path = f"{RUN_ROOT}/{ws.out}/{SCORES}/{model}.jsonl"
    old, new = ws.archived(path), ws.here(path)
    same, total = agreement(old, new, ANSWER, ("query",))
    problems = compare_rows(model, old, new, ("query",), ANSWER)
    return problems, f"{model}: {same}/{total} queries scored identically (deterministic model)"


class MMLongEmbedBundles:
    recomputed: ClassVar[frozenset[str]] = frozenset({"metrics", "analysis.json"})
    rescored: ClassVar[dict[Role, tuple[str, ...] | None]] = {Role.TASK_SCORE: None, Role.AGGREGATE: None}

    def contents(self, specs_root: Path, run: str, root: Path, options: Options) -> RunContents:
        specs = load_embed_specs(specs_root)
        spec = specs.run(run)
        paths = EmbedPaths.for_run(spec, base=root)
        require(paths.report_html, "the run's report", f"milebench embed-report --run {run}")
        found = stamps(paths)
        if options.with_weights:
            hub = [m for m in spec.models if outside(specs.models[m])]
            if hub:
                raise BundleError(
                    f"run {run}: --with-weights: the weights of {', '.join(hub)} come from the hub or an API "
                    "and an MMLongEmbed bundle cannot carry them: archive without --with-weights"
                )
            log.info("run %s: its embedders' weights are in installed packages or built from a seed", run)
        if options.with_data:
            log.info("run %s: its generated sets are in the bundle with or without --with-data", run)
        return RunContents(
            items=run_items(
                run, spec.out, paths, partial(classify, run=run), f"milebench embed-report --run {run}"
            ),
            stamps=found,
            families=[KIT_FAMILY],
            title="MMLongEmbed",
        )

    def check_manifest(self, manifest: Manifest) -> None:
        for role in (Role.PREDICTION, Role.TASK_SCORE):
            for model in models_of(manifest, role):
                if not re.fullmatch(MODEL_NAME, model):
                    raise ValueError(f"{model!r} ({role}) is not an embedder's name")

    def rescore_commands(self, ws: Workspace) -> list[list[str]]:
        """Re-render the report from the archived metrics and analysis, re-evaluate every embedder,
        re-aggregate."""
        commands = [ws.command("embed-report", root=ws.render_root)]
        commands += [
            ws.command("embed-evaluate", "--model", m) for m in models_of(ws.manifest, Role.TASK_SCORE)
        ]
        commands.append(ws.command("embed-aggregate"))
        return commands

    def fetch_commands(self, ws: Workspace) -> list[list[str]]:
        return []

    def reruns(self, ws: Workspace, chosen: list[str], per_model: int, seed: int) -> list[Rerun]:
        """The embedders named, else every one (a run has one cell per embedder)."""
        archived = models_of(ws.manifest, Role.PREDICTION)
        unknown = [m for m in chosen if m not in archived]
        if unknown:
            raise BundleError(f"--rerun {', '.join(unknown)}: no archived scores of that embedder")
        models = load_embed_specs(ws.specs).models
        missing = [m for m in archived if m not in models]
        if missing:
            raise BundleError(f"{ws.bundle}: the bundled specs have no embedder {', '.join(missing)}")
        planned = []
        for name in chosen or archived:
            model = models[name]
            scores = f"{RUN_ROOT}/{ws.out}/{SCORES}/{name}.jsonl"
            planned.append(
                Rerun(
                    name=name,
                    family=KIT_FAMILY,
                    skip=skip_reason(model),
                    command=["embed-run", "--model", name],
                    forget=[
                        scores,
                        scores + PROVENANCE_SUFFIX,
                        f"{RUN_ROOT}/{ws.out}/{SCORES}/{name}.inputs.jsonl",
                    ],
                    judge=partial(judge, model=name),
                )
            )
        return planned


BUNDLES = MMLongEmbedBundles()
