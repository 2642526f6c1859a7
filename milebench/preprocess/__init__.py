"""The tokenizers inputs are counted and cut with, as every benchmark loads them."""
