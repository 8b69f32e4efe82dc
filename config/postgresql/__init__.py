"""Claimlab's PostgreSQL backend: Django's, with batch sizes that fit server-side binding (see base.py)."""
