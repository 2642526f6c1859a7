"""MileBench's judges, the official outputs' import and the comparisons of runs."""
