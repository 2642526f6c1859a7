"""MMLongEmbed: long-context multimodal embedding retrieval (Visual Grounding so far)."""

from milebench.spec.benchmark import Benchmark, SpecKind

BENCHMARK = Benchmark(
    name="mmlongembed",
    specs="mmlongembed",
    rules="milebench.benchmarks.mmlongembed:rules.smk",
    run_model="milebench.benchmarks.mmlongembed.spec:EmbedRunSpec",
    kinds={
        "embedder": SpecKind(model="milebench.benchmarks.mmlongembed.spec:EmbedderFile", files="models/"),
        "paper": SpecKind(model="milebench.benchmarks.mmlongembed.paper:EmbedPaper", files="paper.yaml"),
    },
    check="milebench.benchmarks.mmlongembed.paper:check_specs",
    commands="milebench.benchmarks.mmlongembed.cli:add_commands",
    bundles="milebench.benchmarks.mmlongembed.bundles:BUNDLES",
    title="MMLongEmbed",
)
