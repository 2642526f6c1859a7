"""MileBench's report: the paper's tables, figures and their views."""
