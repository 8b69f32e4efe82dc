"""Secrets that researchers give Claimlab, at rest: Fernet-encrypted with a key derived from SECRET_KEY (HKDF).

Two kinds are kept this way: a verifier's own endpoint key (metaeval/verifiers) and a study's
Prolific API token (annotation/crowd/prolific*.py). A stored secret is decrypted only where it
is sent (the verifier runner's client, the Prolific client's Authorization header); it is never
shown again, logged, exported or returned by the API (the API says only whether one is set).

It lives in annotation/lib because annotation may not import metaeval; the derivation (HKDF-SHA256
of SECRET_KEY with INFO below) is unchanged from metaeval/verifiers/keystore.py, where it was
first written, so keys stored before the move still decrypt.
"""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

__all__ = ["KeyUnreadable", "decrypt", "encrypt"]

#: HKDF's info: part of the derived key; changing it makes every stored secret unreadable.
INFO = b"claimlab verifier endpoint keys v1"


class KeyUnreadable(Exception):
    """The stored secret cannot be decrypted (SECRET_KEY changed since it was saved)."""


def _fernet() -> Fernet:
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=INFO).derive(settings.SECRET_KEY.encode())
    return Fernet(base64.urlsafe_b64encode(derived))


def encrypt(key: str) -> str:
    """The secret as a Fernet token ("" stays "")."""
    return _fernet().encrypt(key.encode()).decode() if key else ""


def decrypt(token: str, *, what: str = "the stored key") -> str:
    """The secret a token holds ("" for none); KeyUnreadable, naming `what`, when SECRET_KEY no longer matches."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        raise KeyUnreadable(
            f"{what} cannot be decrypted (SECRET_KEY changed since it was saved); paste the key again"
        ) from None
