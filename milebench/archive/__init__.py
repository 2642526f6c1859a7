"""Artifact bundles: a run packed with its exact environments (``milebench archive``), and the offline
re-check of a bundle on another machine (``milebench verify``)."""
