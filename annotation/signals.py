"""Signals the annotation app sends to apps that depend on it (annotation imports none of them)."""

from __future__ import annotations

from django.dispatch import Signal

#: A study researcher gave a member's account a new password (members/membership.py).
#: Keyword arguments: user (the account), actor (who reset it), study. The accounts app
#: revokes the account's API tokens, so a reset locks out whoever knew the old password.
member_password_reset = Signal()

#: Labels of a study were imported (transfer/annotation_import.py), sent once the import is
#: committed. Keyword argument: study. The metaeval app starts building the study's report then,
#: so a big study's report is ready by the researcher's first view instead of computed at it.
labels_imported = Signal()
