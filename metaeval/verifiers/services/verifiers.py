"""Defining verifiers: validation of everything a researcher can set, in one place.

The admin, the verifiers page, the API and the demo loader all create and
change verifiers through these functions, so an unknown endpoint, a
researcher URL the address policy refuses, an unknown preset, or a preset
whose labels the study cannot read is refused the same way everywhere.
A researcher's key (``api_key``) is encrypted here and never read back.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from annotation.errors import ServiceError
from annotation.lib.keystore import encrypt
from annotation.models import Study

from ...models import Verifier
from ..addresses import host_problem
from ..endpoints import endpoint_names, get_endpoint, operator_limit, url_problem
from ..presets import PRESETS
from ..presets.baselines import DEFAULT_THRESHOLD, default_sides
from ..presets.pairwise import PAIRWISE_JUDGE
from ..runner.spec import LabelMapper, preset_for

__all__ = [
    "VerifierInvalid",
    "validated_fields",
    "create_verifier",
    "ensure_baselines",
    "update_verifier",
    "stored_fields",
    "BASELINE_NAMES",
]

BASELINE_NAMES = {
    Verifier.Kind.BASELINE_MAJORITY: "baseline-majority",
    Verifier.Kind.BASELINE_OVERLAP: "baseline-overlap",
}
EDITABLE = (
    "name",
    "preset",
    "model",
    "endpoint",
    "base_url",
    "api_key",
    "temperature",
    "max_tokens",
    "concurrency",
    "timeout",
    "retries",
    "template",
    "system_prompt",
    "custom_labels",
    "label_map",
    "options",
    "price_input_per_1k",
    "price_output_per_1k",
)
DEFAULTS: dict[str, Any] = {
    "preset": "",
    "model": "",
    "endpoint": "",
    "base_url": "",
    "api_key": "",
    "temperature": 0.0,
    "max_tokens": 512,
    "concurrency": 8,
    "timeout": 60.0,
    "retries": 2,
    "template": "",
    "system_prompt": "",
    "custom_labels": [],
    "label_map": {},
    "options": {},
    "price_input_per_1k": None,
    "price_output_per_1k": None,
}


class VerifierInvalid(ServiceError):
    """A verifier definition that was refused, with a message per field."""

    def __init__(self, errors: Mapping[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{field}: {message}" for field, message in self.errors.items()))


def _others(study: Study, exclude_pk: int | None) -> QuerySet[Verifier]:
    """The study's verifiers other than the one being edited (all of them for a new one)."""
    verifiers = Verifier.objects.filter(study=study)
    return verifiers if exclude_pk is None else verifiers.exclude(pk=exclude_pk)


class _Checker:
    def __init__(self) -> None:
        self.errors: dict[str, str] = {}

    def add(self, field: str, message: str) -> None:
        self.errors.setdefault(field, message)

    def number(self, values: dict, field: str, low: float, high: float, *, integer: bool = False) -> None:
        value: Any = values.get(field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                value = (int if integer else float)(value)
            except (TypeError, ValueError):
                self.add(field, f"must be a {'whole ' if integer else ''}number, got {value!r}")
                return
        if integer and (isinstance(value, float) and not value.is_integer()):
            self.add(field, f"must be a whole number, got {value!r}")
            return
        if not math.isfinite(value) or not low <= value <= high:
            self.add(field, f"must be between {low:g} and {high:g}, got {value!r}")
            return
        values[field] = int(value) if integer else float(value)

    def price(self, values: dict, field: str) -> None:
        value = values.get(field)
        if value in (None, ""):
            values[field] = None
            return
        try:
            price = Decimal(str(value))
        except InvalidOperation:
            self.add(field, f"must be a number (price per 1,000 tokens), got {value!r}")
            return
        if not price.is_finite() or price < 0 or price >= Decimal("1000000"):
            self.add(field, f"must be a price from 0 to 999,999 per 1,000 tokens, got {value!r}")
            return
        values[field] = price


def _check_name(study: Study, values: dict, check: _Checker, exclude_pk: int | None) -> None:
    name = values.get("name")
    if not isinstance(name, str) or not name.strip():
        check.add("name", "is required")
        return
    name = values["name"] = name.strip()
    if len(name) > 100:
        check.add("name", f"is {len(name)} characters long; the limit is 100")
    elif _others(study, exclude_pk).filter(name=name).exists():
        check.add("name", f"the study already has a verifier named {name!r}")


def _check_label_map(study: Study, values: dict, check: _Checker) -> None:
    label_map = values.get("label_map") or {}
    if not isinstance(label_map, Mapping) or not all(
        isinstance(key, str) and isinstance(value, str) for key, value in label_map.items()
    ):
        check.add("label_map", 'must map preset labels to study labels, e.g. {"unsupported": "not_supported"}')
        return
    bad = [value for value in label_map.values() if value not in study.labels]
    if bad:
        check.add("label_map", f"{bad[0]!r} is not one of the study's labels ({', '.join(study.labels)})")
    values["label_map"] = {key.strip(): value for key, value in label_map.items()}


def _check_llm(study: Study, values: dict, check: _Checker) -> None:
    preset_id = values.get("preset") or ""
    if preset_id not in PRESETS:
        check.add(
            "preset",
            f"{preset_id!r} is not a preset; choose one of {', '.join(PRESETS)}"
            if preset_id
            else f"is required; choose one of {', '.join(PRESETS)}",
        )
    model = str(values.get("model") or "").strip()
    if not model:
        check.add("model", "is required (the model name the endpoint expects)")
    elif len(model) > 200:
        check.add("model", "is longer than 200 characters")
    values["model"] = model
    cap = _check_endpoint(values, check)
    _check_numbers(values, check, cap=cap)
    custom_labels = values.get("custom_labels") or []
    if isinstance(custom_labels, str):
        custom_labels = [part.strip() for part in custom_labels.split(",") if part.strip()]
    if not isinstance(custom_labels, Sequence) or not all(isinstance(label, str) for label in custom_labels):
        check.add("custom_labels", "must be a list of labels")
        custom_labels = []
    values["custom_labels"] = list(custom_labels)
    if preset_id != "custom":
        for field in ("template", "system_prompt", "custom_labels"):
            if values.get(field):
                check.add(field, f"only the custom preset takes a {field.replace('_', ' ')}")
    if preset_id not in PRESETS or check.errors.get("custom_labels"):
        return
    try:
        preset = preset_for(
            preset_id,
            template=values.get("template") or "",
            labels=values["custom_labels"],
            system=values.get("system_prompt") or "",
        )
    except (KeyError, ValueError) as exc:
        check.add("template" if "template" in str(exc) else "custom_labels", str(exc).strip("'\""))
        return
    if "label_map" in check.errors:
        return
    unmapped = LabelMapper(study.labels, study.label_aliases, values["label_map"]).unmapped(preset.prediction_labels)
    if unmapped:
        check.add(
            "label_map",
            (
                f"the {preset_id} preset answers {', '.join(preset.prediction_labels)}, and "
                f"{', '.join(map(repr, unmapped))} is not one of the study's labels ({', '.join(study.labels)}); "
                "map it, e.g. {" + ", ".join(f'"{label}": "{study.labels[-1]}"' for label in unmapped) + "}"
            ),
        )


def _check_numbers(values: dict, check: _Checker, *, cap: int | None = None, baseline: bool = False) -> None:
    """Every numeric setting within its range (the operator's limits); each message names the range.

    A baseline sends nothing to a model, but stores the same columns: they are checked too, so that
    a huge or negative number is refused by name rather than failing in the database. Its limits
    never fall below the defaults a baseline is created with.
    """

    def limit(name: str, field: str) -> float:
        high = operator_limit(name)
        return max(high, DEFAULTS[field]) if baseline else high

    check.number(values, "temperature", 0.0, 2.0)
    check.number(values, "max_tokens", 1, limit("tokens", "max_tokens"), integer=True)
    check.number(values, "concurrency", 1, min(limit("concurrency", "concurrency"), cap or math.inf), integer=True)
    check.number(values, "timeout", 0.001, limit("timeout", "timeout"))
    check.number(values, "retries", 0, limit("retries", "retries"), integer=True)
    check.price(values, "price_input_per_1k")
    check.price(values, "price_output_per_1k")


def _check_endpoint(values: dict, check: _Checker) -> int | None:
    """An operator endpoint by name (and a model it allows), or a researcher URL the address policy allows.

    Returns the endpoint's concurrency cap, if any.
    """
    name = str(values.get("endpoint") or "").strip()
    base_url = str(values.get("base_url") or "").strip()
    values["endpoint"], values["base_url"] = name, base_url
    names = ", ".join(endpoint_names()) or "none defined: the operator sets CLAIMLAB_ENDPOINTS"
    if name:
        endpoint = get_endpoint(name)
        if endpoint is None:
            check.add("endpoint", f"{name!r} is not an endpoint of this server; choose one of: {names}")
            return None
        if base_url:
            check.add("base_url", f"leave it empty: the {name!r} endpoint has its own URL")
        if values.get("api_key"):
            check.add("api_key", f"leave it empty: the {name!r} endpoint uses the server's key")
        if endpoint.models and values["model"] and values["model"] not in endpoint.models:
            check.add("model", f"the {name!r} endpoint offers {', '.join(endpoint.models)}; got {values['model']!r}")
        return endpoint.max_concurrency
    if not base_url:
        check.add("endpoint", f"is required; choose one of: {names}")
        return None
    if not settings.VERIFIER_RESEARCHER_ENDPOINTS:
        check.add(
            "base_url",
            f"this server does not allow researcher endpoints (CLAIMLAB_RESEARCHER_ENDPOINTS); "
            f"choose an endpoint instead: {names}",
        )
        return None
    problem = url_problem(base_url) or ("is longer than 500 characters" if len(base_url) > 500 else None)
    if problem is None:
        parts = urlsplit(base_url)
        problem = host_problem(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
    if problem:
        check.add("base_url", problem)
    return None


def _check_overlap(study: Study, values: dict, check: _Checker) -> None:
    options = dict(values.get("options") or {})
    unknown = set(options) - {"threshold", "positive_label", "negative_label"}
    if unknown:
        check.add(
            "options", f"unknown option(s) {', '.join(sorted(unknown))}; use threshold, positive_label, negative_label"
        )
        return
    holder = {"threshold": options.get("threshold", DEFAULT_THRESHOLD)}
    check.number(holder, "threshold", 0.0, 1.0)
    options["threshold"] = holder["threshold"]
    positive, negative = default_sides(study.labels, study.binary_map)
    options.setdefault("positive_label", positive)
    options.setdefault("negative_label", negative)
    for side in ("positive_label", "negative_label"):
        if options[side] not in study.labels:
            check.add(
                "options",
                f"{side} must be one of the study's labels ({', '.join(study.labels)}); got {options[side]!r}",
            )
    if options["positive_label"] == options["negative_label"]:
        check.add("options", "positive_label and negative_label must differ")
    values["options"] = options


def _check_study_kind(study: Study, kind: str, values: dict) -> None:
    """Claim verifiers belong to verification studies, the pairwise judge to preference studies."""
    pairwise = kind == Verifier.Kind.LLM and values.get("preset") == PAIRWISE_JUDGE.id
    if study.kind == Study.Kind.PREFERENCE and not pairwise:
        raise ServiceError(
            f"a preference study's automatic judge is an LLM verifier with the {PAIRWISE_JUDGE.id} preset "
            "(it compares the two claim lists); claim verifiers and baselines judge verification studies"
        )
    if study.kind != Study.Kind.PREFERENCE and pairwise:
        raise VerifierInvalid({"preset": f"{PAIRWISE_JUDGE.id} compares two claim lists: it is for preference studies"})


def validated_fields(study: Study, kind: str, values: dict, *, exclude_pk: int | None = None) -> dict:
    """The values, normalised, if a verifier of this kind may have them in this study; else VerifierInvalid."""
    check = _Checker()
    _check_study_kind(study, kind, values)
    if kind not in Verifier.Kind.values:
        check.add("kind", f"must be one of {', '.join(Verifier.Kind.values)}, got {kind!r}")
        raise VerifierInvalid(check.errors)
    _check_name(study, values, check, exclude_pk)
    _check_label_map(study, values, check)
    if kind == Verifier.Kind.LLM:
        _check_llm(study, values, check)
    else:
        for field in ("preset", "model", "endpoint", "base_url", "api_key", "template", "system_prompt"):
            if values.get(field):
                check.add(field, f"a {kind} verifier sends nothing to a model: leave {field} empty")
        _check_numbers(values, check, baseline=True)
        if kind == Verifier.Kind.BASELINE_OVERLAP:
            _check_overlap(study, values, check)
        elif values.get("options"):
            check.add("options", f"a {kind} verifier takes no options")
    if check.errors:
        raise VerifierInvalid(check.errors)
    return values


def stored_fields(values: dict) -> dict:
    """The values as model fields: the researcher's key encrypted, never kept in the clear."""
    values = dict(values)
    key = str(values.pop("api_key", "") or "").strip()
    values["api_key_encrypted"] = encrypt(key) if key and not values.get("endpoint") else ""
    return values


@transaction.atomic
def create_verifier(
    *,
    study: Study,
    name: str,
    kind: str = Verifier.Kind.LLM,
    created_by: User | None = None,
    **fields: Any,
) -> Verifier:
    """A new verifier of a verification study; every field checked, VerifierInvalid names the bad ones."""
    unknown = set(fields) - set(EDITABLE)
    if unknown:
        raise VerifierInvalid(dict.fromkeys(sorted(unknown), "unknown field"))
    if kind == Verifier.Kind.IMPORTED:
        raise VerifierInvalid({"kind": "imported verifiers are made by importing predictions (import_predictions)"})
    values = stored_fields(validated_fields(study, kind, {**DEFAULTS, **fields, "name": name}))
    try:
        with transaction.atomic():  # a savepoint, so that the name can be looked up after a refused insert
            return Verifier.objects.create(study=study, kind=kind, created_by=created_by, **values)
    except IntegrityError:
        _name_taken(study, values["name"], exclude_pk=None)
        raise


def _name_taken(study: Study, name: str, *, exclude_pk: int | None) -> None:
    """After a refused write: VerifierInvalid when a concurrent write took the name (the only clash we expect).

    Any other constraint is a bug in the checks above, and is raised as it is, never given a false reason.
    """
    if _others(study, exclude_pk).filter(name=name).exists():
        raise VerifierInvalid({"name": f"the study already has a verifier named {name!r}"}) from None


@transaction.atomic
def update_verifier(*, verifier: Verifier, **changes: Any) -> Verifier:
    """Change a verifier's settings (its kind stays); a new prompt or model simply gets new cache keys."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise VerifierInvalid(
            {name: "cannot be changed" if name == "kind" else "unknown field" for name in sorted(unknown)}
        )
    if verifier.kind == Verifier.Kind.IMPORTED and set(changes) - {"name", "price_input_per_1k", "price_output_per_1k"}:
        raise ServiceError("an imported verifier only holds predictions; only its name and prices can change")
    verifier = Verifier.objects.select_for_update().get(pk=verifier.pk)
    values = {field: getattr(verifier, field) for field in EDITABLE if field != "api_key"}
    values.update(changes)
    values = validated_fields(verifier.study, verifier.kind, values, exclude_pk=verifier.pk)
    if values["endpoint"] or "api_key" in values:  # a new key replaces the old; an operator endpoint needs none
        values = stored_fields(values)
    for field, value in values.items():
        setattr(verifier, field, value)
    try:
        with transaction.atomic():
            verifier.save()
    except IntegrityError:
        _name_taken(verifier.study, values["name"], exclude_pk=verifier.pk)
        raise
    return verifier


@transaction.atomic
def ensure_baselines(*, study: Study, created_by: User | None = None) -> list[Verifier]:
    """The study's two baseline verifiers, created when missing (by their kind, whatever they are named)."""
    found = []
    for kind, name in BASELINE_NAMES.items():
        verifier = Verifier.objects.filter(study=study, kind=kind).order_by("pk").first()
        if verifier is None:
            taken = set(Verifier.objects.filter(study=study).values_list("name", flat=True))
            unique, n = name, 1
            while unique in taken:
                n += 1
                unique = f"{name}-{n}"
            verifier = create_verifier(study=study, name=unique, kind=kind, created_by=created_by)
        found.append(verifier)
    return found
