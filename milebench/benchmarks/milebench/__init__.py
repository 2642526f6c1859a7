"""MileBench, the kit's first benchmark: its specs are the specs root, its rules this package's rules.smk."""

from milebench.spec.benchmark import Benchmark, SpecKind

BENCHMARK = Benchmark(
    name="milebench",
    specs="",
    rules="milebench.benchmarks.milebench:rules.smk",
    run_model="milebench.benchmarks.milebench.spec.run:RunSpec",
    kinds={
        "task": SpecKind(model="milebench.benchmarks.milebench.spec.task:TaskSpec", files="tasks/"),
        "model": SpecKind(model="milebench.spec.model:ModelSpec", files="models/"),
        "paper": SpecKind(model="milebench.benchmarks.milebench.paper:PaperSpec", files="paper.yaml"),
        "data-lock": SpecKind(
            model="milebench.benchmarks.milebench.spec.data_lock:DataLock",
            files="locks/milebench-hub.lock.yaml",
        ),
        "weights-lock": SpecKind(
            model="milebench.spec.weights_lock:WeightsLock", files="locks/weights.lock.yaml"
        ),
    },
    check="milebench.benchmarks.milebench.check:check_specs",
    commands="milebench.benchmarks.milebench.cli:add_commands",
    bundles="milebench.benchmarks.milebench.archive.hooks:BUNDLES",
    title="MileBench",
    examples=(
        "milebench render-input --run smoke --model tiny-llava --task ActionSequence \\\n"
        "      --mode multi-image --sample 0             # what a model receives, one sample",
        "milebench import-official --run paper --model llava-1.5-7b \\\n"
        "      --official-outputs outputs/llava-v1.5-7b --report   # score the official code's outputs",
        "milebench verify R.tar --expect-id ID         # someone else's bundle, offline",
    ),
)
