"""MileBench's specs: its runs, tasks and samples, the data lock, and the folder that loads them together."""
