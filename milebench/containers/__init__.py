"""Per-family container images (``containers/<family>/``) and running kit commands inside them."""
