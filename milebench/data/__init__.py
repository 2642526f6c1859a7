"""Downloads verified against a pinned size and sha256 before use: a benchmark's data archives, weight
files."""
