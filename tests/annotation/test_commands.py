"""The CLI faces (issue 2, point 4): create_study, import_items, import_annotations, add_members, load_demo."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Annotation, Assignment, Item, Study, StudyMember
from annotation.studies.demo import DEMO_ANNOTATORS, DEMO_RESEARCHER
from annotation.vocab import PREFERENCE_LABELS, VERIFICATION_BINARY, VERIFICATION_LABELS
from tests.conftest import jsonl, verification_item

pytestmark = pytest.mark.django_db

User = get_user_model()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def fails(*args: str) -> str:
    with pytest.raises(CommandError) as excinfo:
        run(*args)
    return str(excinfo.value)


# --- create_study -----------------------------------------------------------------------


def test_create_study_defaults_per_kind():
    out = run("create_study", "ver", "--name", "Verification", "--kind", "verification")
    study = Study.objects.get(slug="ver")
    assert study.labels == list(VERIFICATION_LABELS)
    assert study.binary_map == VERIFICATION_BINARY
    assert (study.annotators_per_item, study.systems, study.status) == (3, [], "open")
    assert (study.evidence_judgements, study.justification_required, study.tie_allowed, study.both_bad_allowed) == (
        False,
        False,
        True,
        False,
    )
    assert "Created verification study 'ver'" in out and "supported, contradicted, inconclusive" in out
    assert f"seed {study.seed}" in out

    run("create_study", "pref", "--name", "Preference", "--kind", "preference")
    study = Study.objects.get(slug="pref")
    assert study.labels == list(PREFERENCE_LABELS)
    assert study.binary_map == {} and study.systems == []


def test_create_study_with_labels_aliases_binary_map_and_options(tmp_path):
    instructions = tmp_path / "guide.md"
    instructions.write_bytes("\ufeff# Guide\n\nJudge *only* the summary — not the article.\n".encode("utf-8"))
    out = run(
        "create_study",
        "xsum",
        "--name",
        "  XSum  ",
        "--kind",
        "verification",
        "--annotators-per-item",
        "5",
        "--labels",
        "factual, not_factual",
        "--label-aliases",
        "yes=factual, no = not_factual",
        "--binary-map",
        "factual=positive,not_factual=negative",
        "--seed",
        "1234",
        "--instructions",
        str(instructions),
        "--evidence-judgements",
        "--justification-required",
        "--irrelevant-in-credibility",
        "--status",
        "draft",
    )
    study = Study.objects.get(slug="xsum")
    assert study.name == "XSum"
    assert study.labels == ["factual", "not_factual"]
    assert study.label_aliases == {"yes": "factual", "no": "not_factual"}
    assert study.binary_map == {"factual": "positive", "not_factual": "negative"}
    assert (study.annotators_per_item, study.seed, study.status) == (5, 1234, "draft")
    assert study.evidence_judgements and study.justification_required and study.irrelevant_in_credibility
    assert study.instructions == "# Guide\n\nJudge *only* the summary — not the article.\n"  # BOM dropped
    assert "5 annotators per item, seed 1234" in out


def test_create_preference_study_with_systems_and_flags():
    run(
        "create_study",
        "p",
        "--name",
        "P",
        "--kind",
        "preference",
        "--systems",
        "veriscore, safe",
        "--no-tie",
        "--both-bad",
    )
    study = Study.objects.get(slug="p")
    assert study.systems == ["veriscore", "safe"]
    assert "tie" not in study.labels and "both_bad" in study.labels
    assert (study.tie_allowed, study.both_bad_allowed) == (False, True)


@pytest.mark.parametrize(
    "args, message",
    [
        (["Bad Slug"], "'Bad Slug' is not a valid slug"),
        (["UPPER"], "not a valid slug"),
        (["ok", "--labels", "only-one"], "at least two labels"),
        (["ok", "--labels", "a,b,a"], "labels must be distinct"),
        (["ok", "--label-aliases", "yes=factual"], "label aliases point at unknown label(s): factual"),
        (["ok", "--label-aliases", "yes"], "--label-aliases takes name=value pairs separated by commas; got 'yes'"),
        (["ok", "--label-aliases", "yes="], "--label-aliases takes name=value pairs"),
        (["ok", "--binary-map", "supported=good"], "unknown side(s): good"),
        (["ok", "--binary-map", "maybe=positive"], "unknown label(s): maybe"),
        (["ok", "--systems", "a,b"], "systems are declared for preference studies only"),
        (["ok", "--annotators-per-item", "0"], "between 1 and 100"),
        (["ok", "--name", "   "], "a study needs a name"),
        (["ok", "--instructions", "/no/such/guide.md"], "no such instructions file: /no/such/guide.md"),
    ],
)
def test_create_study_refuses_bad_input(args, message):
    slug, *rest = args
    options = ["--name", "N", *rest] if "--name" not in rest else rest
    text = fails("create_study", slug, "--kind", "verification", *options)
    assert message in text
    assert not Study.objects.exists()


def test_create_study_refuses_bad_preference_setup():
    assert "exactly two distinct names" in fails(
        "create_study", "p", "--name", "P", "--kind", "preference", "--systems", "a,a"
    )
    assert "ordinal scale" in fails("create_study", "p", "--name", "P", "--kind", "preference", "--labels", "good,bad")
    assert not Study.objects.exists()


def test_create_study_refuses_a_duplicate_slug():
    run("create_study", "dup", "--name", "First", "--kind", "verification")
    assert "a study with slug 'dup' already exists" in fails(
        "create_study", "dup", "--name", "Second", "--kind", "preference"
    )
    assert Study.objects.get(slug="dup").name == "First"


# --- import_items / import_annotations --------------------------------------------------


def write(path: Path, *records: dict | str) -> Path:
    path.write_bytes(jsonl(*records).getvalue())
    return path


def test_import_items_and_annotations(verification_study, tmp_path):
    items = write(tmp_path / "items.jsonl", *(verification_item(f"c-{n}") for n in range(1, 5)))
    assert "Imported 4 new and 0 updated item(s) into 'verif'." in run("import_items", "verif", str(items))
    csv_file = tmp_path / "more.csv"
    csv_file.write_text("id,claim\nc-5,Five.\nc-1,One again.\n", encoding="utf-8")
    out = run("import_items", "verif", str(csv_file), "--update")
    assert "Imported 1 new and 1 updated item(s)" in out
    assert Item.objects.get(study=verification_study, external_id="c-1").payload["claim"] == "One again."
    # --format overrides the extension.
    odd = tmp_path / "items.txt"
    odd.write_text("id,claim\nc-6,Six.\n", encoding="utf-8")
    assert "Imported 1 new" in run("import_items", "verif", str(odd), "--format", "csv")

    labels = write(
        tmp_path / "labels.jsonl",
        {"item": "c-1", "annotator": "w1", "label": "supported"},
        {"item": "c-2", "annotator": "w1", "label": "contradicted"},
    )
    assert "Imported 2 new and 0 updated annotation(s) into 'verif'." in run("import_annotations", "verif", str(labels))
    changed = write(tmp_path / "changed.jsonl", {"item": "c-1", "annotator": "w1", "label": "inconclusive"})
    text = fails("import_annotations", "verif", str(changed))
    assert "line 1, field 'annotator'" in text and "--update" in text
    assert "Imported 0 new and 1 updated annotation(s)" in run("import_annotations", "verif", str(changed), "--update")


def test_malformed_item_file_names_line_and_field(verification_study, tmp_path):
    path = write(
        tmp_path / "items.jsonl", verification_item("c-1"), {"id": "c-2", "claim": 7}, verification_item("c-3")
    )
    text = fails("import_items", "verif", str(path))
    assert "nothing was changed" in text
    assert "line 2, field 'claim': must be a string, got number" in text
    assert not Item.objects.exists()
    path = tmp_path / "items.csv"
    path.write_text("id,claim\nc-1,One.\nc-2,\n", encoding="utf-8")
    assert "line 3, field 'claim': is required" in fails("import_items", "verif", str(path))
    assert not Item.objects.exists()


def test_malformed_annotation_file_names_line_and_field(loaded_verification_study, tmp_path):
    before = Annotation.objects.count()
    path = write(
        tmp_path / "labels.jsonl",
        {"item": "c-1", "annotator": "w3", "label": "supported"},
        {"item": "c-2", "annotator": "w3", "label": "perhaps"},
    )
    text = fails("import_annotations", "verif", str(path))
    assert "line 2, field 'label': 'perhaps' is not one of the study's labels" in text
    assert Annotation.objects.count() == before


@pytest.mark.parametrize("command", ["import_items", "import_annotations"])
def test_import_file_problems(verification_study, preference_study, tmp_path, command):
    assert "no such file: " + str(tmp_path / "missing.jsonl") in fails(
        command, "verif", str(tmp_path / "missing.jsonl")
    )
    odd = tmp_path / "items.xlsx"
    odd.write_bytes(b"PK")
    assert "cannot tell the format of 'items.xlsx'" in fails(command, "verif", str(odd))
    path = write(tmp_path / "x.jsonl", verification_item("c-1"))
    assert "no study 'nope' (known studies: pref, verif)" in fails(command, "nope", str(path))


# --- add_members ------------------------------------------------------------------------


PASSWORD = re.compile(r"^(\S+): .*password: (\S+)", re.M)


def test_add_members_prints_passwords_for_new_users_only(verification_study, annotator):
    out = run("add_members", "verif", "ann2", "ann3", "anna", "--role", "annotator")
    passwords = dict(PASSWORD.findall(out))
    assert set(passwords) == {"ann2", "ann3"}  # anna existed already
    assert "shown once" in out
    for username, password in passwords.items():
        assert authenticate(username=username, password=password) is not None
        member = StudyMember.objects.get(study=verification_study, user__username=username)
        assert member.role == "annotator" and not member.is_external
        assert password not in User.objects.get(username=username).password  # only the hash is stored
    assert re.search(r"^anna: already in verif as annotator \(ann-01\); unchanged$", out, re.M)
    pseudonyms = set(
        StudyMember.objects.filter(study=verification_study, role="annotator").values_list("pseudonym", flat=True)
    )
    assert pseudonyms == {"ann-01", "ann-02", "ann-03"}

    again = run("add_members", "verif", "ann2", "ann3", "--role", "researcher")
    assert "password" not in again
    assert again.count("already") == 2
    assert StudyMember.objects.get(study=verification_study, user__username="ann2").role == "annotator"  # not changed


def test_add_existing_user_to_another_study(verification_study, preference_study, annotator):
    out = run("add_members", "pref", "anna", "--role", "researcher")
    assert "anna: added as researcher (res-02)" in out and "password" not in out
    assert authenticate(username="anna", password="pw-anna") is not None  # password untouched


def test_add_members_refuses_bad_input(verification_study):
    assert "invalid username(s): bad name" in fails("add_members", "verif", "bad name", "--role", "annotator")
    assert "no study 'nope'" in fails("add_members", "nope", "x", "--role", "annotator")
    with pytest.raises(CommandError):
        run("add_members", "verif", "x", "--role", "admin")
    assert not User.objects.filter(username="x").exists()


# --- load_demo ------------------------------------------------------------------------


def demo_state() -> dict[str, int]:
    return {
        "studies": Study.objects.count(),
        "items": Item.objects.count(),
        "assignments": Assignment.objects.count(),
        "annotations": Annotation.objects.count(),
        "users": User.objects.count(),
        "members": StudyMember.objects.count(),
    }


def test_load_demo_twice():
    out = run("load_demo")
    first = demo_state()
    passwords = dict(re.findall(r"^  (\S+)\s+(\S+)\s+\((?:researcher|annotator)\)$", out, re.M))
    assert set(passwords) == {DEMO_RESEARCHER, *DEMO_ANNOTATORS}
    for username, password in passwords.items():
        assert authenticate(username=username, password=password) is not None
    demo_passwords = {User.objects.get(username=name).password for name in passwords}

    again = run("load_demo")
    assert demo_state() == first, "a second run created something"
    assert again.count("already loaded") == 4
    assert not re.search(r"\((?:researcher|annotator)\)$", again, re.M), "a second run printed passwords"
    assert {User.objects.get(username=name).password for name in passwords} == demo_passwords

    studies = {study.slug: study for study in Study.objects.all()}
    assert set(studies) == {"factcheck-gpt", "factscore-pref", "xsum-factuality", "wice"}
    xsum = studies["xsum-factuality"]
    assert Item.objects.filter(study=xsum).count() == 1869
    assert Annotation.objects.filter(assignment__study=xsum).count() == 5564
    external = StudyMember.objects.filter(study=xsum, is_external=True)
    assert sorted(external.values_list("pseudonym", flat=True)) == ["wid_0", "wid_1", "wid_2"]
    assert not User.objects.filter(study_memberships__in=external, is_active=True).exists()
    assert set(Annotation.objects.filter(assignment__study=xsum).values_list("label", flat=True)) == {
        "factual",
        "not_factual",
    }
    for item in Item.objects.filter(study=xsum).only("slots_taken")[:50]:
        assert item.slots_taken == Assignment.objects.filter(item=item, slot__isnull=False).count()

    factscore = studies["factscore-pref"]
    assert factscore.kind == "preference" and factscore.systems == ["model_facts", "human_facts"]
    assert Item.objects.filter(study=factscore).count() > 0
    for item in Item.objects.filter(study=factscore):
        assert set(item.payload["lists"]) == {"model_facts", "human_facts"}
    factcheck = studies["factcheck-gpt"]
    assert factcheck.kind == "verification" and Item.objects.filter(study=factcheck).count() > 0

    for study in studies.values():
        roles = dict(
            StudyMember.objects.filter(study=study, user__username__in=[DEMO_RESEARCHER, *DEMO_ANNOTATORS]).values_list(
                "user__username", "role"
            )
        )
        assert roles == {DEMO_RESEARCHER: "researcher", **dict.fromkeys(DEMO_ANNOTATORS, "annotator")}, study.slug


def test_load_demo_completes_a_partly_loaded_study(tmp_path):
    """A study that exists without its items (say, a run that was interrupted) is completed, not duplicated."""
    run(
        "create_study",
        "factscore-pref",
        "--name",
        "made by hand",
        "--kind",
        "preference",
        "--systems",
        "model_facts,human_facts",
    )
    run("load_demo")
    study = Study.objects.get(slug="factscore-pref")
    assert study.name == "made by hand"
    assert Item.objects.filter(study=study).count() == len(
        (Path(__file__).resolve().parents[2] / "fixtures" / "factscore" / "items.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    )
