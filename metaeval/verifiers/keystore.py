"""Researcher API keys at rest: Fernet-encrypted with a key derived from SECRET_KEY (HKDF).

A stored key is decrypted only by the runner, when it builds a client for
that researcher's own endpoint; it is never shown again, logged, exported or
returned by the API (the API says only whether a key is set).
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

__all__ = ["KeyUnreadable", "decrypt", "encrypt"]

INFO = b"claimlab verifier endpoint keys v1"


class KeyUnreadable(Exception):
    """The stored key cannot be decrypted (SECRET_KEY changed since it was saved)."""


def _fernet() -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(settings.SECRET_KEY.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(key: str) -> str:
    """The key as a Fernet token ("" stays "")."""
    return _fernet().encrypt(key.encode()).decode() if key else ""


def decrypt(token: str) -> str:
    """The key a token holds ("" for none); KeyUnreadable when SECRET_KEY no longer matches."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            "the endpoint's API key cannot be decrypted (SECRET_KEY changed since it was saved); paste the key again"
        ) from None
