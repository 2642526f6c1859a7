"""MileBench's data tree, checked against its task specs."""
