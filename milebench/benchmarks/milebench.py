"""MileBench, the kit's first benchmark: its specs are the specs root, its rules rules/milebench.smk."""

from milebench.spec.benchmark import Benchmark

BENCHMARK = Benchmark(
    name="milebench", specs="", rules="rules/milebench.smk", run_model="milebench.spec.run:RunSpec"
)
