"""MileBench, the kit's first benchmark: its specs are the specs root, its rules this package's rules.smk."""

from milebench.spec.benchmark import Benchmark

BENCHMARK = Benchmark(
    name="milebench",
    specs="",
    rules="milebench.benchmarks.milebench:rules.smk",
    run_model="milebench.spec.run:RunSpec",
    commands="milebench.benchmarks.milebench.cli:add_commands",
    title="MileBench",
)
