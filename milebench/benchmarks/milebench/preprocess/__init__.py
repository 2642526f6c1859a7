"""MileBench's prompts, truncation and combined images, as the official code builds them."""
