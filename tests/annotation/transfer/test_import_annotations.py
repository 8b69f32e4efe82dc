"""Importing labels collected elsewhere (docs/architecture.md: Data model, Label vocabularies; docs/formats.md)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from annotation.errors import ImportFailed
from annotation.members.services import add_members
from annotation.models import Annotation, AnnotationRevision, Assignment, Item, Study, StudyMember
from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from tests.conftest import csv_bytes, jsonl, preference_item, verification_item

pytestmark = pytest.mark.django_db

User = get_user_model()


@pytest.fixture
def loaded_preference_study(preference_study) -> Study:
    """Three items; the study's systems are veriscore (A) and safe (B)."""
    import_items(study=preference_study, stream=jsonl(*(preference_item(f"p-{n}") for n in range(1, 4))), fmt="jsonl")
    preference_study.refresh_from_db()
    assert preference_study.systems == ["veriscore", "safe"]
    return preference_study


def annotations_of(study: Study) -> dict[tuple[str, str], Annotation]:
    """(item id, pseudonym) -> annotation."""
    names = dict(StudyMember.objects.filter(study=study).values_list("user_id", "pseudonym"))
    return {
        (annotation.assignment.item.external_id, names[annotation.assignment.annotator_id]): annotation
        for annotation in Annotation.objects.filter(assignment__study=study).select_related("assignment__item")
    }


def counts() -> dict[str, int]:
    return {
        "annotations": Annotation.objects.count(),
        "assignments": Assignment.objects.count(),
        "revisions": AnnotationRevision.objects.count(),
        "users": User.objects.count(),
        "members": StudyMember.objects.count(),
        "slots_taken": sum(Item.objects.values_list("slots_taken", flat=True)),
    }


def import_fails(study: Study, stream, fmt: str = "jsonl", **options) -> ImportFailed:
    before = counts()
    labels_before = sorted(Annotation.objects.values_list("pk", "label", "raw_label"))
    with pytest.raises(ImportFailed) as excinfo:
        import_annotations(study=study, stream=stream, fmt=fmt, **options)
    assert counts() == before, "a failed import changed the database"
    assert sorted(Annotation.objects.values_list("pk", "label", "raw_label")) == labels_before
    return excinfo.value


def assert_error(failure: ImportFailed, line: int, field: str | None, *phrases: str) -> None:
    matching = [error for error in failure.errors if error.line == line and error.field == field]
    assert matching, f"no error at line {line}, field {field!r}; got {failure.errors}"
    for phrase in phrases:
        assert phrase in matching[0].message, f"{phrase!r} not in {matching[0].message!r}"
    assert {error.line for error in failure.errors} == {line}, failure.errors
    assert f"line {line}" + (f", field '{field}'" if field else "") in str(failure)


# --- labels ---------------------------------------------------------------------------


def test_verification_labels_are_canonicalised_and_the_raw_label_kept(loaded_verification_study):
    rows = [
        {"item": "c-1", "annotator": "w3", "label": "supported"},
        {"item": "c-2", "annotator": "w3", "label": "CONTRADICTED"},
        {"item": "c-3", "annotator": "w3", "label": " Inconclusive "},
    ]
    result = import_annotations(study=loaded_verification_study, stream=jsonl(*rows), fmt="jsonl")
    assert (result.created, result.updated, result.records) == (3, 0, 3)
    got = annotations_of(loaded_verification_study)
    assert [(got[(row["item"], "w3")].label, got[(row["item"], "w3")].raw_label) for row in rows] == [
        ("supported", "supported"),
        ("contradicted", "CONTRADICTED"),
        ("inconclusive", " Inconclusive "),
    ]
    assert all(annotation.source == "import" for annotation in got.values())
    assert {a.assignment.status for a in got.values()} == {"submitted"}


def test_label_aliases(db):
    study = create_study(
        slug="xsum",
        name="XSum",
        kind="verification",
        labels=["factual", "not_factual"],
        label_aliases={"yes": "factual", "no": "not_factual"},
    )
    import_items(study=study, stream=jsonl(verification_item("x-1"), verification_item("x-2")), fmt="jsonl")
    rows = [
        {"item": "x-1", "annotator": "wid_0", "label": "yes"},
        {"item": "x-1", "annotator": "wid_1", "label": "No"},
        {"item": "x-2", "annotator": "wid_0", "label": "not_factual"},
        {"item": "x-2", "annotator": "wid_1", "label": "Factual"},
    ]
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    got = annotations_of(study)
    assert {key: (a.label, a.raw_label) for key, a in got.items()} == {
        ("x-1", "wid_0"): ("factual", "yes"),
        ("x-1", "wid_1"): ("not_factual", "No"),
        ("x-2", "wid_0"): ("not_factual", "not_factual"),
        ("x-2", "wid_1"): ("factual", "Factual"),
    }


def test_preference_rows_in_system_space(loaded_preference_study):
    rows = [
        {"item": "p-1", "annotator": "w1", "preferred": "veriscore", "strength": "strong"},
        {"item": "p-1", "annotator": "w2", "preferred": "safe", "strength": "Slight"},
        {"item": "p-1", "annotator": "w3", "preferred": "tie"},
        {"item": "p-2", "annotator": "w1", "label": "b_strong"},
        {"item": "p-2", "annotator": "w2", "label": "tie"},
        {"item": "p-2", "annotator": "w3", "strength": "tie"},
        {"item": "p-3", "annotator": "w1", "label": "A_Slight", "left_system": "safe", "choice": "right_slight"},
        {
            "item": "p-3",
            "annotator": "w2",
            "preferred_system": "safe",
            "strength": "strong",
            "justification": "Fewer errors.",
        },
    ]
    import_annotations(study=loaded_preference_study, stream=jsonl(*rows), fmt="jsonl")
    got = annotations_of(loaded_preference_study)
    values = {key: (a.label, a.preferred_system, a.strength) for key, a in got.items()}
    assert values == {
        ("p-1", "w1"): ("a_strong", "veriscore", "strong"),
        ("p-1", "w2"): ("b_slight", "safe", "slight"),
        ("p-1", "w3"): ("tie", "", ""),
        ("p-2", "w1"): ("b_strong", "safe", "strong"),
        ("p-2", "w2"): ("tie", "", ""),
        ("p-2", "w3"): ("tie", "", ""),
        ("p-3", "w1"): ("a_slight", "veriscore", "slight"),
        ("p-3", "w2"): ("b_strong", "safe", "strong"),
    }
    assert got[("p-1", "w1")].raw_label == "veriscore:strong"
    assert got[("p-2", "w1")].raw_label == "b_strong"
    assert got[("p-3", "w1")].raw_label == "A_Slight"
    assert got[("p-3", "w1")].choice == "right_slight"
    assert got[("p-3", "w1")].assignment.left_system == "safe"  # given: kept
    assert got[("p-3", "w2")].justification == "Fewer errors."
    # Not given: counterbalanced by slot parity across the item's annotators.
    left = dict(Assignment.objects.filter(item__external_id="p-1").values_list("slot", "left_system"))
    assert set(left.values()) == {"veriscore", "safe"}
    assert left[0] != left[1] and left[0] == left[2]


def test_both_bad_is_imported_without_a_preferred_system(db):
    study = create_study(slug="bb", name="Both bad", kind="preference", both_bad_allowed=True, systems=["a", "b"])
    import_items(study=study, stream=jsonl(preference_item("p-1", lists={"a": ["x"], "b": ["y"]})), fmt="jsonl")
    import_annotations(study=study, stream=jsonl({"item": "p-1", "annotator": "w1", "label": "Both_Bad"}), fmt="jsonl")
    annotation = annotations_of(study)[("p-1", "w1")]
    assert (annotation.label, annotation.preferred_system, annotation.strength) == ("both_bad", "", "")


def test_a_tie_is_refused_where_the_study_offers_none(db):
    study = create_study(slug="no-tie", name="No tie", kind="preference", tie_allowed=False, systems=["a", "b"])
    import_items(study=study, stream=jsonl(preference_item("p-1", lists={"a": ["x"], "b": ["y"]})), fmt="jsonl")
    failure = import_fails(study, jsonl({"item": "p-1", "annotator": "w1", "preferred": "tie"}))
    assert_error(failure, 1, "label", "'tie' is not allowed in this study")


def test_csv_annotations_with_evidence_judgements(loaded_verification_study):
    judgements = [{"index": 0, "judgement": "support", "useful": True}]
    stream = csv_bytes(
        [
            {
                "item": "c-1",
                "annotator": "w3",
                "label": "supported",
                "evidence_judgements": judgements,
                "active_ms": "1500",
                "justification": "Passage 1 says so.",
            },
            {"item": "c-2", "annotator": "w3", "label": "inconclusive"},
        ]
    )
    assert import_annotations(study=loaded_verification_study, stream=stream, fmt="csv").created == 2
    got = annotations_of(loaded_verification_study)
    first = got[("c-1", "w3")]
    assert (first.evidence_judgements, first.active_ms, first.justification) == (judgements, 1500, "Passage 1 says so.")
    assert (got[("c-2", "w3")].evidence_judgements, got[("c-2", "w3")].active_ms) == ([], None)


def test_imported_evidence_judgements_may_be_partial_but_are_stored_as_a_submit_stores_them(verification_study):
    passages = [{"text": f"Passage {n}."} for n in range(3)]
    import_items(study=verification_study, stream=jsonl(verification_item("c-1", evidence=passages)), fmt="jsonl")
    given = [{"index": 2, "judgement": "not_support", "useful": True}, {"index": 0, "judgement": "support"}]
    import_annotations(
        study=verification_study,
        stream=jsonl({"item": "c-1", "annotator": "w1", "label": "supported", "evidence": given}),
        fmt="jsonl",
    )
    assert annotations_of(verification_study)[("c-1", "w1")].evidence_judgements == [
        {"index": 0, "judgement": "support", "useful": False},
        {"index": 2, "judgement": "not_support", "useful": True},
    ]


def test_evidence_judgements_on_an_item_without_passages_are_refused(loaded_preference_study):
    failure = import_fails(
        loaded_preference_study,
        jsonl({"item": "p-1", "annotator": "w1", "label": "tie", "evidence": [{"index": 0, "judgement": "support"}]}),
    )
    assert_error(failure, 1, "evidence", "this item has no evidence passages to judge")


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_nul_characters_are_refused(loaded_verification_study, fmt):
    row = {"item": "c-1", "annotator": "w3", "label": "supported", "justification": "Why\x00 not"}
    stream = jsonl(row) if fmt == "jsonl" else csv_bytes([row])
    failure = import_fails(loaded_verification_study, stream, fmt=fmt)
    assert_error(failure, 1 if fmt == "jsonl" else 2, "justification", "contains a NUL character (U+0000)")
    assert ("c-1", "w3") not in annotations_of(loaded_verification_study)


# --- errors: line, field, and nothing stored ------------------------------------------------

V_GOOD = [
    {"item": "c-1", "annotator": "w3", "label": "supported"},
    {"item": "c-2", "annotator": "w3", "label": "contradicted", "active_ms": 1200},
]
P_GOOD = [
    {"item": "p-1", "annotator": "w1", "preferred": "veriscore", "strength": "strong"},
    {"item": "p-2", "annotator": "w1", "label": "tie"},
]

V_JUDGED = {"item": "c-3", "annotator": "w3", "label": "supported"}
V_CASES = [
    (
        "unknown item",
        {"item": "c-99", "annotator": "w3", "label": "supported"},
        "item",
        ("no item 'c-99' in study 'verif'", "import the items first"),
    ),
    ("missing item", {"annotator": "w3", "label": "supported"}, "item", ("is required",)),
    (
        "unknown label",
        {"item": "c-3", "annotator": "w3", "label": "maybe"},
        "label",
        ("'maybe' is not one of the study's labels", "supported, contradicted, inconclusive"),
    ),
    ("missing label", {"item": "c-3", "annotator": "w3"}, "label", ("is required",)),
    ("missing annotator", {"item": "c-3", "label": "supported"}, "annotator", ("is required",)),
    ("blank annotator", {"item": "c-3", "annotator": "  ", "label": "supported"}, "annotator", ("is required",)),
    (
        "same annotator twice on an item in the file",
        {"item": "c-1", "annotator": "w3", "label": "contradicted"},
        "annotator",
        ("'w3' already labelled item 'c-1' on line {first}",),
    ),
    (
        "an existing (item, annotator) without update",
        {"item": "c-3", "annotator": "w1", "label": "contradicted"},
        "annotator",
        ("'w1' already has a label on item 'c-3'", "--update"),
    ),
    (
        "more than N annotators on an item",
        {"item": "c-1", "annotator": "w4", "label": "supported"},
        "item",
        ("item 'c-1' already has 3 annotations",),
    ),
    (
        "negative active_ms",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": -5},
        "active_ms",
        ("whole number of milliseconds", "-5"),
    ),
    (
        "active_ms as words",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": "fast"},
        "active_ms",
        ("whole number of milliseconds", "'fast'"),
    ),
    (
        "fractional active_ms",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": "1.5"},
        "active_ms",
        ("whole number of milliseconds",),
    ),
    (
        "active_ms beyond the column",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": 2**31},
        "active_ms",
        ("whole number of milliseconds",),
    ),
    ("unknown field", {"item": "c-3", "annotator": "w3", "lable": "supported"}, "lable", ("unknown field",)),
    # Evidence judgements: the submit's rule (annotation/workbench/evidence.py), on the item's one passage.
    (
        "evidence judgement off the vocabulary",
        {**V_JUDGED, "evidence": [{"index": 0, "judgement": "maybe"}]},
        "evidence[0]",
        ("evidence judgement must be one of support, not_support, irrelevant", "'maybe'"),
    ),
    (
        "evidence index out of range",
        {**V_JUDGED, "evidence": [{"index": 1, "judgement": "support"}]},
        "evidence[0]",
        ("evidence index must be 0..0, got 1",),
    ),
    (
        "evidence passage judged twice",
        {**V_JUDGED, "evidence": [{"index": 0, "judgement": "support"}, {"index": 0, "judgement": "irrelevant"}]},
        "evidence[1]",
        ("evidence passage 0 is judged twice",),
    ),
    (
        "evidence index as text",
        {**V_JUDGED, "evidence_judgements": [{"index": "0", "judgement": "support"}]},
        "evidence_judgements[0]",
        ("evidence index must be 0..0, got '0'",),
    ),
    (
        "useful as text",
        {**V_JUDGED, "evidence": [{"index": 0, "judgement": "support", "useful": "yes"}]},
        "evidence[0]",
        ("'useful' must be true or false",),
    ),
    (
        "evidence judgement not an object",
        {**V_JUDGED, "evidence": ["support"]},
        "evidence[0]",
        ("must be an object with 'index' and 'judgement', got string",),
    ),
    (
        "misspelt key in an evidence judgement",
        {**V_JUDGED, "evidence": [{"index": 0, "judgement": "support", "usefull": True}]},
        "evidence[0]",
        ("unknown key(s) 'usefull'",),
    ),
]
V_JSON_CASES = [
    (
        "active_ms as a fraction",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": 1.5},
        "active_ms",
        ("whole number of milliseconds", "1.5"),
    ),
    (
        "active_ms as a boolean",
        {"item": "c-3", "annotator": "w3", "label": "supported", "active_ms": True},
        "active_ms",
        ("whole number of milliseconds",),
    ),
    ("label as an object", {"item": "c-3", "annotator": "w3", "label": {"x": 1}}, "label", ("must be a string",)),
    (
        "evidence judgements not a list",
        {"item": "c-3", "annotator": "w3", "label": "supported", "evidence": "good"},
        "evidence",
        ("must be an array of objects",),
    ),
]
P_CASES = [
    (
        "preferred system not in the study",
        {"item": "p-3", "annotator": "w1", "preferred": "gpt4", "strength": "strong"},
        "preferred",
        ("'gpt4' is not one of the study's systems", "veriscore, safe"),
    ),
    (
        "preferred system without strength",
        {"item": "p-3", "annotator": "w1", "preferred": "safe"},
        "strength",
        ("must be 'strong' or 'slight'",),
    ),
    (
        "strength off the scale",
        {"item": "p-3", "annotator": "w1", "preferred": "safe", "strength": "very"},
        "strength",
        ("must be 'strong' or 'slight'", "'very'"),
    ),
    (
        "label off the scale",
        {"item": "p-3", "annotator": "w1", "label": "a_strongest"},
        "label",
        ("'a_strongest' is not one of the study's labels",),
    ),
    (
        "neither label nor preferred",
        {"item": "p-3", "annotator": "w1", "justification": "?"},
        "label",
        ("give either 'label' or 'preferred'",),
    ),
    (
        "left system not in the study",
        {"item": "p-3", "annotator": "w1", "label": "tie", "left_system": "gpt4"},
        "left_system",
        ("'gpt4' is not one of the study's systems",),
    ),
    (
        "same annotator twice",
        {"item": "p-1", "annotator": "w1", "label": "tie"},
        "annotator",
        ("'w1' already labelled item 'p-1' on line {first}",),
    ),
]


def _params(cases, formats):
    return [
        pytest.param(bad, field, phrases, fmt, id=f"{name}-{fmt}")
        for name, bad, field, phrases in cases
        for fmt in formats
    ]


@pytest.mark.parametrize(
    "bad, field, phrases, fmt", _params(V_CASES, ("jsonl", "csv")) + _params(V_JSON_CASES, ("jsonl",))
)
def test_bad_verification_annotation(loaded_verification_study, bad, field, phrases, fmt):
    records = [*V_GOOD, bad]
    stream = jsonl(*records) if fmt == "jsonl" else csv_bytes(records)
    failure = import_fails(loaded_verification_study, stream, fmt)
    first = 1 if fmt == "jsonl" else 2  # CSV: the header is line 1
    assert_error(failure, first + 2, field, *(phrase.format(first=first) for phrase in phrases))
    assert not StudyMember.objects.filter(study=loaded_verification_study, pseudonym="w3").exists()


@pytest.mark.parametrize("bad, field, phrases, fmt", _params(P_CASES, ("jsonl", "csv")))
def test_bad_preference_annotation(loaded_preference_study, bad, field, phrases, fmt):
    records = [*P_GOOD, bad]
    stream = jsonl(*records) if fmt == "jsonl" else csv_bytes(records)
    failure = import_fails(loaded_preference_study, stream, fmt)
    first = 1 if fmt == "jsonl" else 2  # CSV: the header is line 1
    assert_error(failure, first + 2, field, *(phrase.format(first=first) for phrase in phrases))


def test_preference_labels_need_declared_systems(preference_study):
    failure = import_fails(preference_study, jsonl({"item": "p-1", "annotator": "w1", "label": "a_strong"}))
    assert_error(failure, 1, "label", "no declared systems yet", "import its items first")


def test_empty_file(loaded_verification_study):
    failure = import_fails(loaded_verification_study, io.BytesIO(b"\n\n"))
    assert [(error.line, error.message) for error in failure.errors] == [(None, "the file holds no records")]


# --- update and revisions -----------------------------------------------------------------


def test_update_changes_the_label_and_appends_a_revision(loaded_verification_study):
    study = loaded_verification_study
    before = annotations_of(study)[("c-2", "w1")]
    assert before.label == "supported"
    rows = [
        {"item": "c-2", "annotator": "w1", "label": "Contradicted", "justification": "Passage 2 disagrees."},
        {"item": "c-2", "annotator": "w3", "label": "inconclusive"},
    ]
    result = import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl", update=True)
    assert (result.created, result.updated) == (1, 1)
    after = Annotation.objects.get(pk=before.pk)
    assert (after.label, after.raw_label, after.justification) == (
        "contradicted",
        "Contradicted",
        "Passage 2 disagrees.",
    )
    assert after.assignment_id == before.assignment_id
    revision = AnnotationRevision.objects.get(annotation=after)
    assert revision.old_value["label"] == "supported" and revision.old_value["raw_label"] == "supported"
    assert revision.new_value["label"] == "contradicted" and revision.new_value["raw_label"] == "Contradicted"
    assert revision.new_value == after.snapshot()
    # The identical file again changes nothing and records no revision.
    snapshot = counts()
    again = import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl", update=True)
    assert (again.created, again.updated) == (0, 0)
    assert counts() == snapshot
    assert AnnotationRevision.objects.filter(annotation=after).count() == 1


def test_a_second_change_appends_a_second_revision(loaded_verification_study):
    study = loaded_verification_study
    for label in ("contradicted", "inconclusive"):
        import_annotations(
            study=study, stream=jsonl({"item": "c-1", "annotator": "w1", "label": label}), fmt="jsonl", update=True
        )
    annotation = annotations_of(study)[("c-1", "w1")]
    trail = [(r.old_value["label"], r.new_value["label"]) for r in annotation.revisions.order_by("changed_at", "pk")]
    assert trail == [("supported", "contradicted"), ("contradicted", "inconclusive")]


def test_a_failed_update_changes_nothing(loaded_verification_study):
    rows = [
        {"item": "c-1", "annotator": "w1", "label": "contradicted"},
        {"item": "c-404", "annotator": "w1", "label": "contradicted"},
    ]
    failure = import_fails(loaded_verification_study, jsonl(*rows), update=True)
    assert_error(failure, 2, "item", "no item 'c-404'")
    assert annotations_of(loaded_verification_study)[("c-1", "w1")].label == "supported"


# --- identities -----------------------------------------------------------------------


def test_external_identities(loaded_verification_study, verification_study):
    study = loaded_verification_study
    members = StudyMember.objects.filter(study=study, is_external=True).select_related("user")
    assert sorted(member.pseudonym for member in members) == ["w1", "w2"]
    for member in members:
        assert member.role == StudyMember.Role.ANNOTATOR
        assert member.user.is_active is False
        assert member.user.has_usable_password() is False
        assert member.pseudonym not in member.user.username  # the login name is not the file's name
    # The same names in another study are other identities.
    other = create_study(slug="other", name="Other", kind="verification")
    import_items(study=other, stream=jsonl(verification_item("c-1")), fmt="jsonl")
    import_annotations(study=other, stream=jsonl({"item": "c-1", "annotator": "w1", "label": "supported"}), fmt="jsonl")
    mine = StudyMember.objects.get(study=study, pseudonym="w1").user_id
    theirs = StudyMember.objects.get(study=other, pseudonym="w1").user_id
    assert mine != theirs
    # Importing more labels by w1 reuses w1's identity.
    users = User.objects.count()
    import_items(study=study, stream=jsonl(verification_item("c-4")), fmt="jsonl")
    import_annotations(study=study, stream=jsonl({"item": "c-4", "annotator": "w1", "label": "supported"}), fmt="jsonl")
    assert User.objects.count() == users
    assert Assignment.objects.get(item__external_id="c-4", study=study).annotator_id == mine


def test_a_members_pseudonym_is_that_member(loaded_verification_study, annotator):
    study = loaded_verification_study
    member = StudyMember.objects.get(study=study, user=annotator)
    users, members = User.objects.count(), StudyMember.objects.count()
    import_annotations(
        study=study, stream=jsonl({"item": "c-1", "annotator": member.pseudonym, "label": "inconclusive"}), fmt="jsonl"
    )
    assert (User.objects.count(), StudyMember.objects.count()) == (users, members)
    assignment = Assignment.objects.get(item__external_id="c-1", annotator=annotator)
    assert assignment.annotation.label == "inconclusive"
    member.refresh_from_db()
    assert member.is_external is False


# --- slots -------------------------------------------------------------------------------


def test_slots_taken_counts_slot_holding_assignments(loaded_verification_study, annotator, make_user):
    study = loaded_verification_study
    bob = make_user("bob")
    add_members(study=study, usernames=["bob"], role="annotator")
    import_items(study=study, stream=jsonl(verification_item("c-4")), fmt="jsonl")
    c3, c4 = Item.objects.get(study=study, external_id="c-3"), Item.objects.get(study=study, external_id="c-4")
    # anna skipped c-3 (her slot went back); bob is working on c-4 in slot 1.
    Assignment.objects.create(study=study, item=c3, annotator=annotator, slot=None, max_slots=3, status="skipped")
    Assignment.objects.create(
        study=study,
        item=c4,
        annotator=bob,
        slot=1,
        max_slots=3,
        status="active",
        lease_expires_at=timezone.now() + timedelta(minutes=30),
    )
    rows = [
        {"item": "c-3", "annotator": "w3", "label": "supported"},
        {"item": "c-4", "annotator": "w1", "label": "supported"},
        {"item": "c-4", "annotator": "w2", "label": "supported"},
    ]
    import_annotations(study=study, stream=jsonl(*rows), fmt="jsonl")
    for item in Item.objects.filter(study=study):
        assert item.slots_taken == Assignment.objects.filter(item=item, slot__isnull=False).count(), item
    assert dict(Item.objects.filter(study=study).values_list("external_id", "slots_taken")) == {
        "c-1": 2,
        "c-2": 2,
        "c-3": 3,
        "c-4": 3,
    }
    assert sorted(Assignment.objects.filter(item=c4).values_list("slot", flat=True)) == [0, 1, 2]
    failure = import_fails(study, jsonl({"item": "c-4", "annotator": "w3", "label": "supported"}))
    assert_error(failure, 1, "item", "item 'c-4' already has 3 annotations")


def test_update_with_only_a_new_active_ms_changes_the_timing_without_a_revision(loaded_verification_study):
    import_annotations(
        study=loaded_verification_study,
        stream=jsonl({"item": "c-1", "annotator": "w1", "label": "supported", "active_ms": 4200}),
        fmt="jsonl",
        update=True,
    )
    annotation = annotations_of(loaded_verification_study)[("c-1", "w1")]
    assert annotation.active_ms == 4200
    assert AnnotationRevision.objects.filter(annotation=annotation).count() == 0


def test_an_open_assignment_is_not_overwritten_by_an_import(loaded_verification_study, annotator):
    item = Item.objects.get(study=loaded_verification_study, external_id="c-3")
    Assignment.objects.create(
        study=loaded_verification_study,
        item=item,
        annotator=annotator,
        slot=2,
        max_slots=3,
        status=Assignment.Status.ACTIVE,
        lease_expires_at=timezone.now() + timedelta(minutes=10),
    )
    for update in (False, True):
        with pytest.raises(ImportFailed) as failure:
            import_annotations(
                study=loaded_verification_study,
                stream=jsonl({"item": "c-3", "annotator": "ann-01", "label": "supported"}),
                fmt="jsonl",
                update=update,
            )
        assert "line 1, field 'annotator'" in str(failure.value)
        assert "has an assignment on item 'c-3' that is active" in str(failure.value)
    assert not Annotation.objects.filter(assignment__item=item, assignment__annotator=annotator).exists()
