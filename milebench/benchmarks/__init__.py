"""The benchmarks the kit ships, each a package that declares itself through an entry point of the group
``milebench.benchmarks`` (``pyproject.toml``), as a benchmark in another distribution does
(:mod:`milebench.spec.benchmark`)."""
