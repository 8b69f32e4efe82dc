"""Where an import was asked for, and how that face names each option in an error.

An error that asks the user to change an option must name it as the face they used: the command's
flag (`--update`), the import page's field ("Replace entries whose id already exists"), the API's
parameter (`'update': true`). Both the adapters (adapters/base.py re-exports these) and the import
services (services/) read this module, which imports nothing of the feature, so neither has to
import the other.
"""

from __future__ import annotations

#: The command line, the import page, the API.
CLI, PAGE, API = "cli", "page", "api"
#: An upload from the page or the API imported by a background job: the job does not record which.
WEB = "web"

#: An option as each face names it (docs/importing.md lists all three).
OPTIONS: dict[str, dict[str, str]] = {
    "from": {CLI: "--from", PAGE: "the 'From' field", API: "'from'"},
    "pair": {CLI: "--pair FILE", PAGE: "the 'Second file' field", API: "'pair'"},
    "systems": {CLI: "--systems A,B", PAGE: "the 'Systems' field (A,B)", API: "'systems' (A,B)"},
    "verifier": {CLI: "--verifier NAME", PAGE: "the 'Verifier' field", API: "'verifier'"},
    "source_labels": {CLI: "--source-labels", PAGE: "the 'The file's own labels' field", API: "'source_labels'"},
    # The import form's checkbox (transfer/forms.ImportForm.update) and the API's field of the same meaning.
    "update": {
        CLI: "--update",
        PAGE: "'Replace entries whose id already exists' ticked",
        API: "'update': true",
        WEB: "'Replace entries whose id already exists' ticked (the API's 'update': true)",
    },
    # The verifiers page's import form (metaeval/verifiers/forms.py) calls it otherwise.
    "update_predictions": {CLI: "--update", PAGE: "'Replace predictions that exist' ticked", API: "'update': true"},
}


def option(name: str, face: str = CLI) -> str:
    """How the face an import came from names one of its options."""
    return OPTIONS[name].get(face, OPTIONS[name][CLI])


def to_replace(face: str = CLI, *, name: str = "update") -> str:
    """The end of an error about an entry that exists already: how this face replaces it."""
    how = option(name, face)
    return f"use {how} to replace it" if face == CLI else f"import the file again with {how} to replace it"


def again_to_replace(face: str = CLI, *, name: str = "update") -> str:
    """'import the file again', and how this face replaces what is there (an id taken meanwhile)."""
    return f"import the file again (with {option(name, face)} to replace it)"
