"""MMLongEmbed: long-context multimodal embedding retrieval (Visual Grounding so far)."""

from milebench.spec.benchmark import Benchmark

BENCHMARK = Benchmark(
    name="mmlongembed",
    specs="mmlongembed",
    rules="milebench.benchmarks.mmlongembed:rules.smk",
    run_model="milebench.benchmarks.mmlongembed.spec:EmbedRunSpec",
    commands="milebench.benchmarks.mmlongembed.cli:add_commands",
    title="MMLongEmbed",
)
