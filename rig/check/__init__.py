"""Ledger and checker: what was issued and made durable, and what survived a cut."""
