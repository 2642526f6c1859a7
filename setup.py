"""The package list: every ``milebench*`` package, and ``milebench.specs`` from the top-level ``specs/``
folder (the specs sit beside the Snakefile in the tree and inside the package in a wheel)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["milebench*"]), "milebench.specs"],
    package_dir={"milebench.specs": "specs"},
)
