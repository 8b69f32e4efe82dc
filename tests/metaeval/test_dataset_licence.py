"""The licence a Hugging Face export's card states (issue 34): a known identifier, or refused by name.

Through `manage.py export_dataset --license`, the code path the export job's builder shares
(metaeval/dataset_export/writer.py): an SPDX id in any case becomes the Hub's identifier in the card's
YAML `license:` and its Licence section; a misspelt one is refused before anything is written.
"""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import CommandError, call_command

from annotation.errors import ServiceError
from metaeval.dataset_export.licenses import LICENSES, dataset_license


def card(folder) -> tuple[dict, str]:
    text = (folder / "README.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1]), text


def export(study, folder, *extra: str) -> None:
    call_command("export_dataset", study.slug, str(folder), "--format", "hf", *extra, stderr=io.StringIO())


def test_an_spdx_id_in_any_case_is_written_as_the_hubs_identifier(loaded_verification_study, tmp_path):
    export(loaded_verification_study, tmp_path / "out", "--license", "CC-BY-SA-4.0")
    header, text = card(tmp_path / "out")
    assert header["license"] == "cc-by-sa-4.0"
    assert "`cc-by-sa-4.0`, as stated by whoever exported the study." in text


def test_no_licence_is_other_and_the_card_says_it_is_unknown(loaded_verification_study, tmp_path):
    export(loaded_verification_study, tmp_path / "out")
    header, text = card(tmp_path / "out")
    assert header["license"] == "other" and "Unknown (`other`)" in text


def test_a_misspelt_licence_is_refused_and_nothing_is_written(loaded_verification_study, tmp_path):
    with pytest.raises(CommandError, match=r"licence 'cc-by4' is not one of cc-by-4\.0, cc-by-sa-4\.0"):
        export(loaded_verification_study, tmp_path / "out", "--license", "cc-by4")
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["cc by 4.0", "mit\nextra: 1", "gpl-2.0-or-later", "llama2"])
def test_only_the_listed_identifiers_pass(value):
    with pytest.raises(ServiceError, match="is not one of"):
        dataset_license(value)


def test_every_listed_identifier_is_its_own_canonical_form():
    assert all(dataset_license(name) == name for name in LICENSES)
    assert dataset_license(" Apache-2.0 ") == "apache-2.0" and dataset_license("") == "other"
