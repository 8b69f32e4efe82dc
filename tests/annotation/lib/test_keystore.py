"""Secrets at rest (annotation/lib/keystore.py): Fernet with a key derived from SECRET_KEY.

The keystore moved here from metaeval/verifiers so that annotation (the Prolific token) can use it
without importing metaeval; the derivation must be the one it always was, or every verifier key
stored before the move would stop decrypting. The reference here derives that key on its own.
"""

from __future__ import annotations

import base64
import importlib.util

import pytest
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.test import override_settings

from annotation.lib.keystore import KeyUnreadable, decrypt, encrypt


def reference_fernet(secret_key: str) -> Fernet:
    """The derivation metaeval/verifiers/keystore.py used: HKDF-SHA256, no salt, this info, 32 bytes."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"claimlab verifier endpoint keys v1").derive(
        secret_key.encode()
    )
    return Fernet(base64.urlsafe_b64encode(derived))


def test_a_key_stored_before_the_move_still_decrypts_and_the_other_way_round():
    stored_earlier = reference_fernet(settings.SECRET_KEY).encrypt(b"sk-researcher-key").decode()
    assert decrypt(stored_earlier) == "sk-researcher-key"
    stored_now = encrypt("ProlificToken_123")
    assert reference_fernet(settings.SECRET_KEY).decrypt(stored_now.encode()) == b"ProlificToken_123"
    assert "ProlificToken_123" not in stored_now


def test_nothing_stays_nothing():
    assert encrypt("") == "" and decrypt("") == ""


def test_a_changed_secret_key_makes_a_stored_key_unreadable_naming_what():
    token = encrypt("sk-123")
    with override_settings(SECRET_KEY="another secret key, of a reinstalled server"):
        with pytest.raises(KeyUnreadable, match=r"^the endpoint's API key cannot be decrypted \(SECRET_KEY changed"):
            decrypt(token, what="the endpoint's API key")
        with pytest.raises(KeyUnreadable, match=r"^the stored key cannot be decrypted"):
            decrypt(token)


def test_the_keystore_has_one_home():
    assert importlib.util.find_spec("metaeval.verifiers.keystore") is None
