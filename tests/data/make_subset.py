#!/usr/bin/env python3
"""Regenerate the reduced copies of the real datasets in ``tests/data/``.

Usage:  python tests/data/make_subset.py SOURCE [--out DIR]

SOURCE is a folder laid out as the published data is collected
(``SOURCE/xsum_hallucination/factuality_annotations_xsum_summaries.csv``,
``SOURCE/wice/claim_test.jsonl``, ...; each dataset's README.txt names the
repository, commit and path it was taken from).  ``--out`` defaults to the
folder of this script.

Only the files, columns and fields that the tests and ``fixtures/build_demo.py``
read are kept; nothing is rewritten: kept values are the source's, kept rows
are in source order (blank lines kept, so line numbers stay the source's).
Large files are gzipped (no name, time 0 in the header), so a re-run gives
byte-identical files.  Each folder gets its licence file and a README.txt:
the source's README.txt followed by what was kept.  Stdlib only.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

REGENERATE = "Regenerate: python tests/data/make_subset.py SOURCE  (SOURCE = the folder holding this dataset's folder)."


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _gzip(path: Path, data: bytes) -> None:
    """Deterministic gzip: no file name and time 0 in the header."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", compresslevel=9, fileobj=buffer, mtime=0) as stream:
        stream.write(data)
    _write(path, buffer.getvalue())


def _jsonl(src: Path, keep) -> bytes:
    """Each non-blank line through ``keep(record, line_number)``; blank lines as they are."""
    out = []
    with src.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                out.append(line)
                continue
            out.append(json.dumps(keep(json.loads(line), number), ensure_ascii=False) + "\n")
    return "".join(out).encode("utf-8")


def _only(record: dict, names) -> dict:
    """The named fields of ``record`` that it has, in the source's order."""
    return {name: value for name, value in record.items() if name in names}


def _folder(source: Path, out: Path, name: str, licence: str | None, kept: str) -> Path:
    """Create ``out/name`` with the licence file and README.txt (source README + what was kept)."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    if licence:
        shutil.copyfile(source / name / licence, folder / licence)
    readme = (source / name / "README.txt").read_text(encoding="utf-8").rstrip("\n")
    note = f"\n\n--- Copy in Claimlab: tests/data/{name}/ ---\n{kept.strip()}\n{REGENERATE}\n"
    _write(folder / "README.txt", (readme + note).encode("utf-8"))
    return folder


# --- one function per dataset ------------------------------------------------

XSUM_LICENCE = """\
# Licence: XSum Hallucination Annotations

`factuality_annotations_xsum_summaries.csv.gz` is
`factuality_annotations_xsum_summaries.csv` of
https://github.com/google-research-datasets/xsum_hallucination_annotations
(commit 4abdbb2c807cb93c1df1188a1992d20a55cdcc34), gzipped, otherwise unchanged.

Licence: Creative Commons Attribution 4.0 International (CC BY 4.0),
https://creativecommons.org/licenses/by/4.0/ (as stated in the source README;
the source repository has no separate licence file).

Attribution: Joshua Maynez, Shashi Narayan, Bernd Bohnet and Ryan McDonald.
2020. On Faithfulness and Factuality in Abstractive Summarization. ACL 2020,
pages 1906-1919. https://aclanthology.org/2020.acl-main.173
"""


def xsum(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "xsum_hallucination",
        None,
        """\
Kept: factuality_annotations_xsum_summaries.csv.gz = factuality_annotations_xsum_summaries.csv, all rows and all
  five columns (bbcid, system, summary, is_factual, worker_id), byte for byte, gzipped. The other two CSVs are not
  used and not copied. LICENSE.md states the CC BY 4.0 licence above (the source has no licence file).
Read by: tests/stats/conftest.py (fixture xsum), fixtures/build_demo.py (demo study xsum-factuality).""",
    )
    name = "factuality_annotations_xsum_summaries.csv"
    _gzip(folder / f"{name}.gz", (source / "xsum_hallucination" / name).read_bytes())
    _write(folder / "LICENSE.md", XSUM_LICENCE.encode("utf-8"))


def longsciverify(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "longsciverify",
        "LICENSE.MIT.txt",
        """\
Kept: {pubmed,arxiv}_reviewer_{1,2,3}.csv with the columns id and model_{m}_sent_{s}_factuality (m, s = 1..3) only,
  all rows, cells as in the source (empty = no rating), UTF-8 BOM and CRLF line ends as in the source. The summaries,
  coherence and fluency columns and the *_test.json source documents are not used and not copied.
Read by: tests/stats/conftest.py (fixture longsci), tests/metaeval/test_cohen_bootstrap.py (PubMed).""",
    )
    for dataset in ("pubmed", "arxiv"):
        for reviewer in (1, 2, 3):
            name = f"{dataset}_reviewer_{reviewer}.csv"
            with (source / "longsciverify" / name).open(encoding="utf-8-sig", newline="") as stream:
                rows = list(csv.reader(stream))
            keep = [n for n, column in enumerate(rows[0]) if column == "id" or column.endswith("_factuality")]
            text = io.StringIO()
            csv.writer(text, lineterminator="\r\n").writerows([[row[n] for n in keep] for row in rows])
            _write(folder / name, text.getvalue().encode("utf-8-sig"))


def wice(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "wice",
        "LICENSE.md",
        """\
Kept: the two oracle_chunks_claim_test.<model>.entailment_score.json files unchanged;
  oracle_chunks_claim_test.gpt-4-0613.raw_outputs.jsonl.gz = the raw outputs file, unchanged, gzipped;
  claim_test.jsonl.gz = claim_test.jsonl, all 358 lines in order, each with label, claim and meta.{id, claim_context}
  only, and evidence only for the 100 claims that have model scores (the others' evidence and every line's
  supporting_sentences, meta.claim_title and meta.claim_section are not used); values unchanged, gzipped.
Read by: tests/stats/conftest.py (fixture wice), tests/verifiers/test_wice.py, tests/verifiers_run/test_wice.py,
  fixtures/build_demo.py (demo study wice).""",
    )
    src = source / "wice"
    scores = "oracle_chunks_claim_test.{}.entailment_score.json"
    for model in ("gpt-4-0613", "gpt-3.5-turbo-0613"):
        shutil.copyfile(src / scores.format(model), folder / scores.format(model))
    predicted = set(json.loads((src / scores.format("gpt-4-0613")).read_text(encoding="utf-8")))

    def keep(record: dict, _number: int) -> dict:
        names = {"label", "claim", "meta"} | ({"evidence"} if record["meta"]["id"] in predicted else set())
        kept = _only(record, names)
        kept["meta"] = _only(record["meta"], {"id", "claim_context"})
        return kept

    _gzip(folder / "claim_test.jsonl.gz", _jsonl(src / "claim_test.jsonl", keep))
    raw = "oracle_chunks_claim_test.gpt-4-0613.raw_outputs.jsonl"
    _gzip(folder / f"{raw}.gz", (src / raw).read_bytes())


FACTCHECK_SENTENCE_FIELDS = (
    "text",
    "decontext",
    "claims",
    "auto_evidence",
    "auto_evidence_url",
    "claims_factuality_label",
    "stance_claim_autoEvid",
)


def factcheck_gpt(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "factcheck_gpt",
        "LICENSE.Apache-2.0.txt",
        f"""\
Kept: factcheck-GPT-benchmark.jsonl.gz = factcheck-GPT-benchmark.jsonl, all 94 lines in order, each reduced to
  sentences.<key>.{{{", ".join(FACTCHECK_SENTENCE_FIELDS)}}};
  the other response and sentence fields are not used; values unchanged, gzipped. The subtask files are not copied.
Read by: tests/metaeval/test_scores.py (stances), fixtures/build_demo.py (demo study factcheck-gpt).""",
    )

    def keep(record: dict, _number: int) -> dict:
        return {
            "sentences": {
                key: _only(sentence, FACTCHECK_SENTENCE_FIELDS) for key, sentence in record["sentences"].items()
            }
        }

    name = "factcheck-GPT-benchmark.jsonl"
    _gzip(folder / f"{name}.gz", _jsonl(source / "factcheck_gpt" / name, keep))


def factscore_labeled(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "factscore_labeled",
        "LICENSE.factscore.MIT.txt",
        """\
Kept: {InstructGPT,ChatGPT,PerplexityAI}.jsonl.gz = the three labelled files, all 183 lines each in order, each
  with input, topic, cat and annotations (null, or per sentence text, model-atomic-facts and human-atomic-facts);
  output and is-relevant are not used; values unchanged, gzipped. prompt_entities.txt is not copied.
Read by: tests/metaeval/test_scores.py (FActScore), fixtures/build_demo.py (demo study factscore-pref, ChatGPT).""",
    )

    def keep(record: dict, _number: int) -> dict:
        kept = _only(record, {"input", "topic", "cat", "annotations"})
        if kept.get("annotations") is not None:
            kept["annotations"] = [
                _only(sentence, {"text", "model-atomic-facts", "human-atomic-facts"})
                for sentence in kept["annotations"]
            ]
        return kept

    for system in ("InstructGPT", "ChatGPT", "PerplexityAI"):
        _gzip(folder / f"{system}.jsonl.gz", _jsonl(source / "factscore_labeled" / f"{system}.jsonl", keep))


def veriscore_demos(source: Path, out: Path) -> None:
    folder = _folder(
        source,
        out,
        "veriscore_demos",
        "LICENSE.Apache-2.0.txt",
        """\
Kept: few_shot_examples.jsonl, unchanged (data_sample.jsonl is not used and not copied).
Read by: tests/verifiers/test_veriscore.py (metaeval's shipped copy must equal it byte for byte).""",
    )
    shutil.copyfile(source / "veriscore_demos" / "few_shot_examples.jsonl", folder / "few_shot_examples.jsonl")


DATASETS = {
    function.__name__: function
    for function in (xsum, longsciverify, wice, factcheck_gpt, factscore_labeled, veriscore_demos)
}
FOLDERS = {"xsum": "xsum_hallucination"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="folder holding xsum_hallucination/, wice/, ... as published")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: this script's folder)")
    args = parser.parse_args(argv)
    source, out = args.source.resolve(), args.out.resolve()
    if source == out:
        parser.error("SOURCE must be the full published data, not the reduced copies")
    for name, build in DATASETS.items():
        if not (source / FOLDERS.get(name, name)).is_dir():
            parser.error(f"{source / FOLDERS.get(name, name)} not found")
        build(source, out)
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.parent != out:
            print(f"{path.stat().st_size:>9}  {path.relative_to(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
