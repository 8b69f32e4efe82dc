"""The report CSV is written like the exports (annotation/lib/csvsafe.py): no row split, no formula run."""

from __future__ import annotations

import csv
import io

from annotation.studies.services import create_study
from annotation.transfer.services.annotation_import import import_annotations
from annotation.transfer.services.item_import import import_items
from metaeval.reporting import build_report
from metaeval.reporting.csv_format import CSV_COLUMNS, report_csv
from tests.conftest import jsonl, verification_item

#: Item ids with a line break or a quote inside (ids are stripped, so not at either end).
ITEMS = ["c\r1", "c\n2", "c\r\n3", 'c "4"']
#: Annotator names a spreadsheet would run as formulas; each disagreement's note starts with one.
ANNOTATORS = ["=1+1", "+cmd", "-2", "@SUM(A1)"]


def test_awkward_item_ids_and_annotator_names_stay_in_their_cells(db):
    study = create_study(slug="awkward-report", name="Awkward", kind="verification", annotators_per_item=2)
    import_items(study=study, stream=jsonl(*(verification_item(item) for item in ITEMS)), fmt="jsonl")
    import_annotations(
        study=study,
        stream=jsonl(
            *(
                {"item": item, "annotator": who, "label": label}
                for n, item in enumerate(ITEMS)
                for who, label in ((ANNOTATORS[n], "supported"), (ANNOTATORS[(n + 1) % 4], "contradicted"))
            )
        ),
        fmt="jsonl",
    )

    text = report_csv(build_report(study))
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == CSV_COLUMNS and text.endswith("\r\n")
    assert {len(row) for row in rows} == {len(CSV_COLUMNS)}  # a split row would be short
    disagreements = {row[1]: row[7] for row in rows if row[0] == "disagreement"}
    assert set(disagreements) == {f"item:{item}" for item in ITEMS}
    for n, item in enumerate(ITEMS):
        note = disagreements[f"item:{item}"]
        assert note.startswith("'" + ANNOTATORS[n]) or note.startswith("'" + ANNOTATORS[(n + 1) % 4]), note
        assert f"{ANNOTATORS[n]}=supported" in note and f"{ANNOTATORS[(n + 1) % 4]}=contradicted" in note
