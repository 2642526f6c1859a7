"""MileBench reproducibility kit: fetch -> preprocess -> infer -> score -> report (+ aggregate).

Choose a run spec with `--config run=NAME` (default: smoke, the embedded mini-MileBench) and a specs
folder with `--config specs=PATH` (default: specs/, shipped in the package). Where jobs run is
the workflow's, not the run spec's: `--config deployment=local|docker|apptainer` (default local; a
profile's `config:` may set it). Deployment docker only: `--config image_base=REF` builds the family
images on another base, `image_ca_bundle=PEM` trusts an extra CA while building (corporate proxies), and
`docker_jobs=all` runs every job in an image, not only inference (the stages in the kit's, a tiny model's
weights in its family's); deployment apptainer pulls from `image_registry=URI`. All logic
lives in the `milebench` package; every rule is one `milebench` command, so any job can be re-run by hand.

The run spec's `benchmark` picks the rules, and only its rules file is parsed: each benchmark's package
ships its own (milebench/benchmarks/milebench/rules.smk, milebench/benchmarks/mmlongembed/rules.smk), named
by its entry point of the group milebench.benchmarks. This file holds what they share; rules/common.smk
the functions their rules call.

Every file a job reads is one of its declared inputs and every file it writes one of its declared outputs
(the download cache, the inference journal and the embedding cache excepted: they outlive a failed job on
purpose). Each command is given `--root`, the folder its paths are laid out under: `.` on a shared file
system, the copy Snakemake stages the job's files in under a storage provider (`--default-storage-provider`).

Targets of every benchmark:
  all                  the default: the run's report (MileBench: and results/<run>/aggregate.json)
Targets of a MileBench run besides the default:
  aggregate            results/<run>/aggregate.json and verdict.json (scores with intervals, verdict)
  main_table           every multi-image task score (the cells of the paper's main table)
  model_<model>        every task score of one model (its column), e.g. `snakemake model_random`
  results/<run>/scores/<model>/<mode>/<Task>.json   one cell
  audit                reports/<run>/audit/: the determinism and drift audits the run spec declares
                       (`audit:`), whose tables the report carries
  archive              archives/<run>/: the run's artifact bundle (`milebench archive`); add data and
                       weights with --config archive_options="--with-data --with-weights"
Targets of an MMLongEmbed run (e.g. `--config run=embed-smoke`) besides the default:
  embed_generate       results/<run>/vg/: the generated Visual Grounding set
  embed_aggregate      results/<run>/analysis.json: every embedder's metrics and the analyses
  embed_report         reports/<run>/: the report (the default's job)
  results/<run>/metrics/<embedder>.json   one embedder's metrics
"""

import sys
from pathlib import Path

from milebench.errors import KitError
from milebench.spec.benchmark import benchmark_of_run
from milebench.spec.base import SpecError
from milebench.spec.run_limit import limit_runs
from milebench.spec.workflow_config import workflow_config


include: "rules/common.smk"


# Every --config key, checked: an unknown one (`runs=paper`) is refused by name, never ignored. A bad key
# or run spec ends the plan with its message alone.
try:
    CONFIG = workflow_config(config)
    SPECS_DIR = CONFIG.specs.resolve()
    BENCHMARK_RUN = CONFIG.run
    BENCHMARK = benchmark_of_run(SPECS_DIR, BENCHMARK_RUN)
except (SpecError, KitError) as err:
    sys.exit(str(err))
# The kit's command on the host; MileBench's rules run it in the images under deployment apptainer.
# `--config limit=N` replaces the run spec's limit, in this plan and in every job's command.
LIMIT = "" if CONFIG.limit is None else f" --limit {CONFIG.limit}"
limit_runs(CONFIG.limit)
MB = Untracked(f"{sys.executable} -m milebench --specs {SPECS_DIR}{LIMIT}")
KIT_FAMILY = "kit"


include: str(BENCHMARK.rules_file(Path(workflow.basedir)))


localrules:
    all,


# The first rule here, so the default target (Snakemake takes none from an included file): the run's
# BENCHMARK_TARGETS, which the included rules file sets.
rule all:
    input:
        BENCHMARK_TARGETS,
