"""The kit's default specs (YAML, validated by the pydantic models of ``milebench.spec``). They sit at the top
of the tree beside the Snakefile; the build (setup.py) ships this folder as ``milebench.specs``, read through
``importlib.resources``."""
