"""Forms of the researcher and annotator pages: they parse input, services decide."""

from __future__ import annotations

from django import forms

from annotation.models import ImportJob
from annotation.transfer.adapters import ADAPTERS
from annotation.transfer.adapters.source_labels import DEFAULT as SOURCE_LABEL_DEFAULT
from annotation.transfer.adapters.source_labels import SHORT as SOURCE_LABELS


def source_choices() -> list[tuple[str, str]]:
    """Claimlab's own format, then every pipeline whose files the adapters read (docs/importing.md)."""
    return [("", "Claimlab JSON Lines / CSV"), *((adapter.name, adapter.title) for adapter in ADAPTERS.values())]


class ImportForm(forms.Form):
    what = forms.ChoiceField(choices=ImportJob.What.choices, label="Import")
    source = forms.ChoiceField(choices=source_choices, required=False, label="From")
    file = forms.FileField(help_text="JSON Lines (.jsonl) or CSV (.csv), UTF-8; or the chosen pipeline's own file.")
    pair = forms.FileField(
        required=False,
        label="Second file",
        help_text="VeriScore into a preference study: the second extractor's claims file.",
    )
    systems = forms.CharField(
        required=False,
        max_length=400,
        label="Systems",
        help_text="From a pipeline: the two extractors (A,B), or the model that wrote the responses.",
    )
    source_labels = forms.ChoiceField(
        choices=[(name, f"{name}: {text}") for name, text in SOURCE_LABELS.items()],
        initial=SOURCE_LABEL_DEFAULT,
        required=False,
        label="The file's own labels",
        help_text="Importing items from a pipeline whose file holds labels beside them (Factcheck-GPT, "
        "FActScore, VeriScore's labelled examples, WiCE, Label Studio): gold keeps all N slots for the study's annotators; annotator keeps the "
        "labels as an imported annotator's, each taking a slot.",
        error_messages={"invalid_choice": f"choose one of {', '.join(SOURCE_LABELS)}; %(value)s is not one"},
    )
    file_format = forms.ChoiceField(
        choices=[("", "from the file name"), ("jsonl", "JSON Lines"), ("csv", "CSV")], required=False, label="Format"
    )
    update = forms.BooleanField(required=False, label="Replace entries whose id already exists")
