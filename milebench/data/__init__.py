"""MileBench data: upstream schema, verified fetch, safe extraction and validation."""
