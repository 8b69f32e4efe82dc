"""The licence a dataset card states: one of the common licences' identifiers, or ``other`` (unknown).

The card's YAML ``license:`` takes the Hugging Face Hub's identifiers, which are the SPDX ids of the
common licences in lower case (``cc-by-4.0`` for SPDX ``CC-BY-4.0``). A licence is a claim the
exporter makes about data others will reuse, so a misspelt one ("cc-by4") is refused with the list,
rather than written into a card that the Hub would show as unknown.
"""

from __future__ import annotations

from annotation.errors import ServiceError

from .card import UNKNOWN_LICENSE

#: The Hub's identifiers of the licences datasets of labels most often carry, each with its name.
LICENSES: dict[str, str] = {
    "cc-by-4.0": "Creative Commons Attribution 4.0",
    "cc-by-sa-4.0": "Creative Commons Attribution-ShareAlike 4.0",
    "cc-by-nc-4.0": "Creative Commons Attribution-NonCommercial 4.0",
    "cc-by-nc-sa-4.0": "Creative Commons Attribution-NonCommercial-ShareAlike 4.0",
    "cc-by-nd-4.0": "Creative Commons Attribution-NoDerivatives 4.0",
    "cc-by-nc-nd-4.0": "Creative Commons Attribution-NonCommercial-NoDerivatives 4.0",
    "cc-by-3.0": "Creative Commons Attribution 3.0",
    "cc-by-sa-3.0": "Creative Commons Attribution-ShareAlike 3.0",
    "cc0-1.0": "Creative Commons Zero 1.0 (public domain)",
    "odc-by": "Open Data Commons Attribution",
    "odbl": "Open Data Commons Open Database License",
    "pddl": "Open Data Commons Public Domain Dedication and License",
    "mit": "MIT",
    "apache-2.0": "Apache 2.0",
    "bsd-3-clause": "BSD 3-Clause",
    "gpl-3.0": "GNU GPL 3.0",
    "lgpl-3.0": "GNU LGPL 3.0",
    "mpl-2.0": "Mozilla Public License 2.0",
    "unlicense": "The Unlicense",
    UNKNOWN_LICENSE: "Other or unknown (the card says so)",
}


def dataset_license(value: str | None) -> str:
    """The Hub identifier for `value` (an identifier or the SPDX id, any case); empty is ``other``.

    ServiceError names the value and the identifiers known."""
    cleaned = (value or "").strip().lower()
    if not cleaned:
        return UNKNOWN_LICENSE
    if cleaned not in LICENSES:
        raise ServiceError(
            f"licence {value!r} is not one of {', '.join(LICENSES)} "
            f"(the Hugging Face Hub's identifiers; '{UNKNOWN_LICENSE}' when it is none of them)"
        )
    return cleaned
