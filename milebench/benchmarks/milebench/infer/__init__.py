"""MileBench's inference jobs: a cell of one model over tasks of one mode, one sample's rendered input, and
the baselines that answer from the sample itself."""
