"""Benchmarks served by the kit's shared core (specs, I/O, provenance, report rendering).

Each benchmark beyond MileBench is one package here, with its specs under ``specs/<benchmark>/`` and its
Snakemake rules in ``rules/<benchmark>.smk``.
"""
