"""API key format and hashing, in one place (services, authentication and the migration use it)."""

from __future__ import annotations

import hashlib
import secrets

# Shown in lists so that an owner can tell keys apart; not enough to guess a key.
PREFIX_LENGTH = 8


def new_key() -> str:
    """A high-entropy key (256 bits): a plain SHA-256 is then enough, no slow hash needed."""
    return secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_prefix(key: str) -> str:
    return key[:PREFIX_LENGTH]
