"""MileBench, the kit's first benchmark: its specs are the specs root, its rules the top Snakefile's."""

from milebench.benchmarks import Benchmark

BENCHMARK = Benchmark(name="milebench", specs="", rules=None, run_model="milebench.spec.run:RunSpec")
