"""Command handlers that span the kit's layers (the specs with their locks and audits): the CLI frame calls
them; no domain package imports them."""
