"""MileBench's part in artifact bundles: which files of its runs go in, how they are re-scored and
which inference cells are re-run (``milebench.archive`` does the rest for every benchmark)."""
