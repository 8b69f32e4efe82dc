"""Factuality scores from claim verdicts: FActScore, VeriScore F1@K and RAGAS faithfulness.

The input is a claim table, one row per claim, with the response it came
from (``response_id``), the system that wrote it (``system``), optionally a
``domain``, and its verdict ``label`` (NaN = no verdict, e.g. no human
majority). Callers say which labels count as supported, which as not
supported and which are left out (e.g. FActScore's IR when a study excludes
it); any other label is an error, so a typo cannot silently change a score.

Every fraction comes with the counts it rests on, and every function states
the rule it applied to responses without claims, because the papers differ
there and a reader must be able to tell which one a number follows.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, overload

import numpy as np
import pandas as pd

from .bootstrap import percentile_ci
from .estimate import Estimate, json_ready
from .json_rows import RecordWindows, SpilledTexts, coded, record_texts

logger = logging.getLogger(__name__)

__all__ = [
    "MixedResponses",
    "ResponseRows",
    "lazy_response_rows",
    "rows_are_lazy",
    "response_counts",
    "response_keys",
    "first_rows",
    "factscore",
    "veriscore_f1_at_k",
    "veriscore_k",
    "veriscore_k_by_domain",
    "ragas_faithfulness",
    "claim_scores",
    "FACTSCORE_RULE",
    "VERISCORE_RULE",
    "RAGAS_RULE",
]

ALL_DOMAINS = "(all)"
COUNT_COLUMNS = ("supported", "not_supported", "excluded", "no_verdict")
FACTSCORE_RULE = (
    "Per response: supported / countable claims (countable = supported + not supported; excluded labels and "
    "claims without a verdict are left out and counted). A system's FActScore is the mean over its answered "
    "responses that have at least one countable claim (Min et al. 2023). Responses that did not answer "
    "(abstained) are left out of the mean and reported as share_answered; an answered response with zero "
    "countable claims has no score (null), is left out of the mean and counted in n_zero_claim. "
    "factscore_length_penalised is FActScore's reported `score` with its default length penalty "
    "(gamma = 10): a response with n < 10 countable claims has its score multiplied by exp(1 - 10 / n); "
    "the plain mean is FActScore's `init_score`."
)
#: FActScore's default length-penalty hyperparameter (factscorer.get_score, gamma=10).
FACTSCORE_GAMMA = 10
VERISCORE_RULE = (
    "Per response: precision = supported / countable claims, recall = min(supported / K, 1), F1@K = "
    "2PR / (P + R), and 0 when nothing is supported (Song et al. 2024). K is frozen per domain: given, or the "
    "median number of countable claims per answered response of that domain over all systems, taken as "
    "sorted(counts)[n // 2] as in VeriScore's code. An answered response with zero countable claims scores "
    "F1@K = 0 (precision undefined, recall 0) and stays in the mean; abstained responses are left out and "
    "counted. A system's F1@K is the mean over its answered responses."
)
RAGAS_RULE = (
    "Per response: faithfulness = claims supported by the context / countable claims (RAGAS). A response with "
    "zero countable claims has no faithfulness (null, as RAGAS returns NaN); it is left out of the mean and "
    "counted in n_zero_claim. A system's faithfulness is the mean over responses with a value."
)
Boot = dict[str, Any]


# --- the shared per-response counting ------------------------------------------------


def _verdicts(labels: pd.Series, supported: Collection, unsupported: Collection, excluded: Collection) -> np.ndarray:
    """Per claim: 0 supported, 1 not supported, 2 excluded, 3 no verdict."""
    roles = [set(supported), set(unsupported), set(excluded)]
    clash = (roles[0] & roles[1]) | (roles[0] & roles[2]) | (roles[1] & roles[2])
    if clash:
        raise ValueError(f"labels given more than one role: {sorted(map(str, clash))!r}")
    codes, uniques = pd.factorize(labels, sort=False, use_na_sentinel=True)
    lookup = np.full(len(uniques) + 1, 3, dtype=np.int64)  # the extra slot is NaN's -1
    for i, value in enumerate(uniques):
        role = next((r for r, members in enumerate(roles) if value in members), None)
        if role is None:
            unknown = [u for u in uniques if not any(u in m for m in roles)][:10]
            raise ValueError(f"labels with no role (supported, unsupported or excluded): {unknown!r}")
        lookup[i] = role
    return lookup[codes]


def verdict_counts(
    labels: pd.Series, codes: np.ndarray, n: int, supported: Collection, unsupported: Collection, excluded: Collection
) -> np.ndarray:
    """Per response (``codes``: each claim's, of ``n``), its claims' counts by verdict: (n, 4), ``COUNT_COLUMNS``."""
    verdict = _verdicts(labels, supported, unsupported, excluded)
    return np.bincount(codes * 4 + verdict, minlength=n * 4).reshape(n, 4)


class MixedResponses(ValueError):
    """A response whose claims give it more than one system or domain: a score per response has no one group."""


def first_rows(codes: np.ndarray, n: int) -> np.ndarray:
    """The row where each of the ``n`` codes first appears (code -1, missing, is skipped).

    Codes from ``pd.factorize(..., sort=False)`` are numbered as they first appear, so a code's
    first row is where their running maximum rises: one pass, no sort (a million claims' responses
    in a few ms). Codes numbered otherwise fall back to ``np.unique``. A code that never appears
    is an error: there is no row to take its values from.
    """
    codes = np.asarray(codes)
    if not len(codes):
        first = np.zeros(0, dtype=np.int64)
    else:
        first = np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)
    if len(first) == n and np.array_equal(codes[first], np.arange(n)):
        return first
    present, at = np.unique(codes, return_index=True)
    at = at[present >= 0]
    if not np.array_equal(present[present >= 0], np.arange(n)):
        raise ValueError(f"codes 0..{n - 1} expected, each with a row")
    return at.astype(np.int64)


#: Put before the item id of a claim without a response id where that id is also a response's id.
OWN_RESPONSE = "item:"


def response_keys(response_ids: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Each claim's response: its response id, or for a claim without one (``""``) its own, named by its item id.

    Why one function: the scores, the estimates (ppi) and the verifiers' system correlation must group the
    same claims into the same responses. Item ids and response ids are separate names, so a claim without a
    response id whose item id is also some claim's response id is named ``item:<id>`` (again until it
    clashes with none) instead of joining that response; otherwise its item id, as the rows show it.
    """
    keys = np.asarray(response_ids, dtype=object).copy()
    own = keys == ""
    if not own.any():
        return keys
    named = keys[~own]  # the response ids claims give
    own_keys = np.asarray(items, dtype=object)[own]  # a copy (a boolean index); ids are strings
    clash = _among(own_keys, named)
    while clash.any():
        own_keys[clash] = OWN_RESPONSE + own_keys[clash]
        clash = _among(own_keys, named)
    keys[own] = own_keys
    return keys


def _among(few: np.ndarray, many: np.ndarray) -> np.ndarray:
    """Which of ``few`` are among ``many``, with a Python set: strings keep their hash once computed, where
    pandas hashes them again (for a million claims, a tenth without a response id: 0.5 s in pandas)."""
    if not len(many) or not len(few):
        return np.zeros(len(few), dtype=bool)
    many_set = set(many.tolist())
    return np.array([key in many_set for key in few.tolist()], dtype=bool)


def _per_response_values(codes: np.ndarray, n: int, values: np.ndarray, column: str) -> np.ndarray:
    """The single value of ``column`` per response; several is a data error (MixedResponses)."""
    picked = values[first_rows(codes, n)]
    differs = values != picked[codes]
    if differs.any():
        raise MixedResponses(f"a response has more than one {column} (see claim row {int(np.flatnonzero(differs)[0])})")
    return picked


def response_counts(
    claims: pd.DataFrame,
    *,
    supported: Collection,
    unsupported: Collection,
    excluded: Collection = (),
    responses: pd.DataFrame | None = None,
    response: str = "response_id",
    system: str = "system",
    domain: str = "domain",
    label: str = "label",
    response_codes: tuple[np.ndarray, Any] | None = None,
) -> pd.DataFrame:
    """One row per response: its system, domain, whether it answered, and claim counts.

    Columns: ``response_id, system, domain, answered, supported,
    not_supported, excluded, no_verdict, n_claims`` (all claims) and
    ``n_countable`` (supported + not supported). ``responses`` (columns
    ``response_id, system``, optional ``domain`` and ``answered``) adds
    responses without claims and abstentions; without it every response with
    a claim counts as answered. Without a ``domain`` column all responses
    share one domain, ``"(all)"``. ``response_codes``: ``pd.factorize(claims[response], sort=False,
    use_na_sentinel=True)`` when the caller has it already (a report counts the same claims under
    several sources' verdicts: factorising 100,000 response ids again cost 0.04 s each time).
    """
    absent = [c for c in (response, system, label) if c not in claims.columns]
    if absent:
        raise ValueError(f"claim table lacks columns {absent!r} (has {list(claims.columns)!r})")
    codes, uniques = (
        response_codes
        if response_codes is not None
        else pd.factorize(claims[response], sort=False, use_na_sentinel=True)
    )
    if len(codes) != len(claims):
        raise ValueError("response codes of other claims")
    if (codes < 0).any():
        raise ValueError("claims without a response id")
    n = len(uniques)
    counts = verdict_counts(claims[label], codes, n, supported, unsupported, excluded)
    domains = (
        claims[domain].to_numpy(dtype=object)
        if domain in claims.columns
        else np.full(len(claims), ALL_DOMAINS, dtype=object)
    )
    columns = {
        "system": _per_response_values(codes, n, claims[system].to_numpy(dtype=object), "system"),
        "domain": _per_response_values(codes, n, domains, "domain"),
        **{name: counts[:, i] for i, name in enumerate(COUNT_COLUMNS)},
        "answered": np.ones(n, dtype=bool),
    }
    if responses is None:
        # the frame made once, in its final column order: its index moved into a column copied every
        # column again (100 MB more for a while at a million responses, issue 35)
        return pd.DataFrame(
            {
                "response_id": uniques,
                **columns,
                "n_claims": counts.sum(axis=1),
                "n_countable": counts[:, 0] + counts[:, 1],
            }
        )
    out = _merge_responses(
        pd.DataFrame(columns, index=pd.Index(uniques, name="response_id")), responses, response, system, domain
    )
    out["n_claims"] = out[list(COUNT_COLUMNS)].sum(axis=1)
    out["n_countable"] = out["supported"] + out["not_supported"]
    return out.rename_axis("response_id").reset_index()


def _merge_responses(
    out: pd.DataFrame, responses: pd.DataFrame, response: str, system: str, domain: str
) -> pd.DataFrame:
    """Add the listed responses (with no claims, or abstained) to the counts."""
    given = pd.DataFrame(
        {
            "system": responses[system].to_numpy(dtype=object),
            "domain": (responses[domain].to_numpy(dtype=object) if domain in responses.columns else ALL_DOMAINS),
            "answered": (responses["answered"].astype(bool).to_numpy() if "answered" in responses.columns else True),
        },
        index=pd.Index(responses[response].to_numpy(), name="response_id"),
    )
    if given.index.duplicated().any():
        raise ValueError(f"responses listed twice: {list(given.index[given.index.duplicated()][:5])!r}")
    unknown = out.index.difference(given.index)
    if len(unknown):
        raise ValueError(f"claims of responses missing from the response table: {list(unknown[:5])!r}")
    clash = out.index[(out["system"] != given.loc[out.index, "system"]).to_numpy()]
    if len(clash):
        raise ValueError(f"responses whose system differs between claims and responses: {list(clash[:5])!r}")
    merged = given.join(out[list(COUNT_COLUMNS)], how="left").fillna(dict.fromkeys(COUNT_COLUMNS, 0))
    merged[list(COUNT_COLUMNS)] = merged[list(COUNT_COLUMNS)].astype(np.int64)
    bad = merged.index[(~merged["answered"]) & (merged[["supported", "not_supported"]].sum(axis=1) > 0)]
    if len(bad):
        raise ValueError(f"responses marked as not answered have claims: {list(bad[:5])!r}")
    return merged


# --- means with bootstrap intervals -----------------------------------------------------


def _mean_estimate(
    values: np.ndarray, *, reason: str, n_resamples: int, seed: int | None, confidence: float
) -> Estimate:
    """Mean of per-response values with a seeded percentile bootstrap CI over responses.

    A resample of n responses drawn with replacement holds each distinct
    value a Multinomial(n, shares) number of times, so the resample means
    are drawn that way: the same distribution as resampling responses, at
    a cost that does not grow with n.
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if n == 0:
        return Estimate.undefined(reason, 0)
    if not n_resamples or n < 2:
        return Estimate(float(values.mean()), None, n)
    distinct, freq = np.unique(values, return_counts=True)
    draws = np.random.default_rng(seed).multinomial(n, freq / n, size=n_resamples)
    means = draws @ distinct / n
    return Estimate(
        float(values.mean()),
        None,
        n,
        ci=percentile_ci(means, confidence),
        extra={
            "ci_method": "percentile bootstrap over responses",
            "n_resamples": n_resamples,
            "seed": seed,
            "confidence": confidence,
        },
    )


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _totals(rows: pd.DataFrame) -> dict[str, int]:
    return {key: int(rows[key].sum()) for key in COUNT_COLUMNS}


def _by(counts: pd.DataFrame, column: str) -> list[tuple[Hashable, np.ndarray]]:
    """(group key, row positions) per value of ``column``, keys sorted."""
    codes, uniques = pd.factorize(counts[column], sort=True)
    return [(uniques[g], np.flatnonzero(codes == g)) for g in range(len(uniques))]


# --- FActScore ---------------------------------------------------------------------------


def _factscore_values(counts: pd.DataFrame) -> np.ndarray:
    n = counts["n_countable"].to_numpy()
    valid = counts["answered"].to_numpy() & (n > 0)
    return np.where(valid, counts["supported"].to_numpy() / np.maximum(n, 1), np.nan)


def _length_penalty(n_countable: np.ndarray) -> np.ndarray:
    """FActScore's penalty for short responses: exp(1 - gamma / n) below gamma claims, else 1."""
    n = n_countable.astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.where(n < FACTSCORE_GAMMA, np.exp(1 - FACTSCORE_GAMMA / np.maximum(n, 1)), 1.0)


def _factscore_group(rows: pd.DataFrame, score: np.ndarray, boot: Boot) -> dict[str, Any]:
    answered = rows["answered"].to_numpy()
    scored = ~np.isnan(score)
    tot = _totals(rows[answered])
    n_ans = int(answered.sum())
    penalised = score * _length_penalty(rows["n_countable"].to_numpy())
    reason = "no answered response has a countable claim"
    return {
        "factscore": _mean_estimate(score[scored], reason=reason, **boot).to_dict(),
        "factscore_length_penalised": _mean_estimate(penalised[scored], reason=reason, **boot).to_dict(),
        "length_penalty_gamma": FACTSCORE_GAMMA,
        "n_responses": len(rows),
        "n_answered": n_ans,
        "share_answered": _ratio(n_ans, len(rows)),
        "n_scored": int(scored.sum()),
        "n_zero_claim": int((answered & ~scored).sum()),
        "mean_claims_per_response": float(rows.loc[answered, "n_claims"].mean()) if n_ans else None,
        "mean_countable_claims_per_response": float(rows.loc[answered, "n_countable"].mean()) if n_ans else None,
        **tot,
        "pooled_supported_fraction": _ratio(tot["supported"], tot["supported"] + tot["not_supported"]),
    }


def _factscore(
    counts: pd.DataFrame, boot: Boot, abstentions_known: bool, systems: list[tuple[Hashable, np.ndarray]] | None = None
) -> tuple[dict[str, Any], np.ndarray]:
    score = _factscore_values(counts)
    out = {
        "rule": FACTSCORE_RULE,
        "abstentions_known": abstentions_known,
        "overall": _factscore_group(counts, score, boot),
        "per_system": {
            key: _factscore_group(counts.iloc[idx], score[idx], boot)
            for key, idx in (systems if systems is not None else _by(counts, "system"))
        },
    }
    return out, score


# --- VeriScore F1@K ---------------------------------------------------------------------


def veriscore_k(n_countable: np.ndarray) -> int | None:
    """VeriScore's K: ``sorted(counts)[n // 2]`` (the upper median), None without responses."""
    counts = np.sort(np.asarray(n_countable, dtype=np.int64))
    return int(counts[len(counts) // 2]) if len(counts) else None


def veriscore_k_by_domain(counts: pd.DataFrame, column: str = "n_countable") -> dict[Hashable, int | None]:
    """VeriScore's K per domain from one source's ``response_counts``: the upper median of ``column``
    over answered responses. Passed back as ``k`` to every source scored on the same responses, it
    gives their F1@K one K, so that the sources' numbers can be compared (each source's own median
    differs when they leave different claims without a verdict)."""
    answered = counts["answered"].to_numpy()
    values = counts[column].to_numpy()
    return {dom: veriscore_k(values[idx][answered[idx]]) for dom, idx in _by(counts, "domain")}


def _f1_at_k(supported: np.ndarray, n_countable: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    s = supported.astype(np.float64)
    precision = np.where(n_countable > 0, s / np.maximum(n_countable, 1), np.nan)
    recall = np.minimum(s / k, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(s > 0, 2 * precision * recall / (precision + recall), 0.0)
    return precision, recall, f1


def _veriscore_group(rows: pd.DataFrame, prf: np.ndarray, reason: str, boot: Boot) -> dict[str, Any]:
    precision, recall, f1 = prf
    answered = rows["answered"].to_numpy()
    has = answered & ~np.isnan(f1)
    with_claims = has & (rows["n_countable"].to_numpy() > 0)
    return {
        "f1_at_k": _mean_estimate(f1[has], reason=reason, **boot).to_dict(),
        "precision": float(np.mean(precision[with_claims])) if with_claims.any() else None,
        "recall": float(np.mean(recall[has])) if has.any() else None,
        "n_responses": len(rows),
        "n_answered": int(answered.sum()),
        "n_zero_claim": int((answered & (rows["n_countable"].to_numpy() == 0)).sum()),
        "mean_supported_per_response": float(rows.loc[answered, "supported"].mean()) if answered.any() else None,
        "mean_countable_claims_per_response": (
            float(rows.loc[answered, "n_countable"].mean()) if answered.any() else None
        ),
        **_totals(rows[answered]),
    }


def _veriscore(
    counts: pd.DataFrame,
    k: int | Mapping[Hashable, int | None] | None,
    boot: Boot,
    k_source: str | Mapping[Hashable, str] = "given",
    systems: list[tuple[Hashable, np.ndarray]] | None = None,
) -> tuple[dict[str, Any], np.ndarray]:
    answered = counts["answered"].to_numpy()
    n_countable = counts["n_countable"].to_numpy()
    prf = np.full((4, len(counts)), np.nan)  # precision, recall, f1, K
    domains: dict[Hashable, Any] = {}
    reasons: dict[Hashable, str] = {}
    for dom, idx in _by(counts, "domain"):
        ans = answered[idx]
        given = k.get(dom) if isinstance(k, Mapping) else k
        k_dom = int(given) if given is not None else veriscore_k(n_countable[idx][ans])
        entry: dict[str, Any] = {
            "k": k_dom,
            "k_source": (k_source.get(dom, "given") if isinstance(k_source, Mapping) else k_source)
            if given is not None
            else "median",
            "n_responses_for_k": int(ans.sum()),
        }
        reasons[dom] = "no answered response in this domain"
        if k_dom is not None and k_dom <= 0:
            reasons[dom] = entry["k_undefined_reason"] = (
                "K is 0 (the median response has no countable claim), so recall and F1@K are undefined"
            )
        elif k_dom is not None:
            p, r, f = _f1_at_k(counts["supported"].to_numpy()[idx], n_countable[idx], k_dom)
            prf[:, idx] = np.where(ans, np.stack([p, r, f, np.full(len(idx), float(k_dom))]), np.nan)
        sub = counts.iloc[idx]
        entry["systems"] = {
            key: _veriscore_group(sub.iloc[j], prf[:3, idx[j]], reasons[dom], boot) for key, j in _by(sub, "system")
        }
        entry["all_systems"] = _veriscore_group(sub, prf[:3, idx], reasons[dom], boot)
        domains[dom] = entry
    reason = "no response with a defined F1@K"
    out = {
        "rule": VERISCORE_RULE,
        "k": {dom: entry["k"] for dom, entry in domains.items()},
        "by_domain": domains,
        "per_system": {
            key: _veriscore_group(counts.iloc[idx], prf[:3, idx], reason, boot)
            for key, idx in (systems if systems is not None else _by(counts, "system"))
        },
        "overall": _veriscore_group(counts, prf[:3], reason, boot),
    }
    return out, prf


# --- RAGAS faithfulness ------------------------------------------------------------------


def _ragas_group(rows: pd.DataFrame, values: np.ndarray, boot: Boot) -> dict[str, Any]:
    has = ~np.isnan(values)
    tot = _totals(rows)
    return {
        "faithfulness": _mean_estimate(values[has], reason="no response has a countable claim", **boot).to_dict(),
        "n_responses": len(rows),
        "n_scored": int(has.sum()),
        "n_zero_claim": int((~has).sum()),
        **tot,
        "pooled_supported_fraction": _ratio(tot["supported"], tot["supported"] + tot["not_supported"]),
    }


def _ragas(
    counts: pd.DataFrame, boot: Boot, systems: list[tuple[Hashable, np.ndarray]] | None = None
) -> tuple[dict[str, Any], np.ndarray]:
    n = counts["n_countable"].to_numpy()
    values = np.where(n > 0, counts["supported"].to_numpy() / np.maximum(n, 1), np.nan)
    out = {
        "rule": RAGAS_RULE,
        "overall": _ragas_group(counts, values, boot),
        "per_system": {
            key: _ragas_group(counts.iloc[idx], values[idx], boot)
            for key, idx in (systems if systems is not None else _by(counts, "system"))
        },
    }
    return out, values


# --- public functions -----------------------------------------------------------------------


#: Whether ``_per_response`` hands out ``ResponseRows`` (columns, made into records a slice at a time)
#: instead of a list of records: set by the report cache around its build (``lazy_response_rows``).
_LAZY_ROWS: ContextVar[bool] = ContextVar("lazy_response_rows", default=False)


def rows_are_lazy() -> bool:
    """Whether long lists are wanted as lazy rows here (inside ``lazy_response_rows``: the report cache's build)."""
    return _LAZY_ROWS.get()


@contextmanager
def lazy_response_rows() -> Iterator[None]:
    """Within this block the score functions' ``per_response`` are ``ResponseRows``, not lists (and the
    report's disagreement list is ``reporting.disagreements.DisagreementRows``).

    Why: at a million claims (125,000 responses, three score blocks) the records as dicts held about
    280 MB through the rest of a report's build; the report cache encodes them a chunk at a time
    (``reporting/cache._Encoded``), which is all it needs them for.
    """
    token = _LAZY_ROWS.set(True)
    try:
        yield
    finally:
        _LAZY_ROWS.reset(token)


class ResponseRows(Sequence[dict[str, Any]]):
    """Per-response records kept as the frame's columns (numpy); a slice is made into records when read.

    The list ``_per_response`` gives outside ``lazy_response_rows`` is this read whole (``rows[:]``).
    """

    def __init__(self, frame: pd.DataFrame | Mapping[str, np.ndarray], values: Collection[str]) -> None:
        """``frame``: the records' columns, as a frame or as arrays by name (no frame made of them: at a million
        responses each copy of the columns was 100 MB more for a while)."""
        self._names = list(frame.keys())
        self._columns = [
            np.asarray(frame[name]) if isinstance(frame, pd.DataFrame) else frame[name] for name in self._names
        ]
        # NaN (or None) in a value column becomes None in its record: JSON has no NaN.
        self._known = {
            position: pd.notna(self._columns[position]) for position, name in enumerate(self._names) if name in values
        }
        self._length = len(self._columns[0]) if self._columns else len(frame)
        self._windows: RecordWindows | None = None
        self._spilled: SpilledTexts | None = None

    def __len__(self) -> int:
        return self._length

    def spill(self) -> None:
        """Write the records' text to a temporary file now and let the columns go (``json_rows.SpilledTexts``):
        read back from there, the same text and the same records."""
        if self._spilled is not None:
            return
        try:
            self._spilled = SpilledTexts(self._record_texts, self._length)
        except OSError as error:  # no temporary folder, or a full one: the list stays in memory, as below the threshold
            logger.warning("per-response rows kept in memory: no temporary file (%s)", error)
            return
        self._columns, self._known, self._windows = [], {}, None

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, int):
            position = range(self._length)[index]  # IndexError as a list gives it
            return self[position : position + 1][0]
        start, stop, step = index.indices(self._length)
        if self._spilled is not None:
            return self._spilled.records(range(start, stop, step))
        cells = []
        for position, column in enumerate(self._columns):
            values = column[start:stop:step].tolist()  # Python scalars, as the JSON encoder wants them
            known = self._known.get(position)
            if known is not None:
                values = [value if keep else None for value, keep in zip(values, known[start:stop:step], strict=True)]
            cells.append(values)
        names = self._names
        return [dict(zip(names, row, strict=True)) for row in zip(*cells, strict=True)]

    def json_text(self, start: int, stop: int) -> str:
        """``json.dumps(self[start:stop], allow_nan=False)``, written from the columns (``stats.json_rows``)."""
        if self._spilled is not None:
            return self._spilled.json_text(start, stop)
        if self._windows is None:
            self._windows = RecordWindows(self._record_texts, self._length)
        return self._windows.json_text(start, stop)

    def _record_texts(self, start: int, stop: int) -> list[str]:
        columns = [
            coded(
                column[start:stop],
                None if (known := self._known.get(position)) is None else known[start:stop],
                distinct=self._names[position] != "response_id",  # one per record: no repeats to look for
            )
            for position, column in enumerate(self._columns)
        ]
        return record_texts(self._names, columns)


def _per_response(counts: pd.DataFrame, values: Mapping[str, np.ndarray]) -> list[dict[str, Any]] | ResponseRows:
    """One JSON-ready record per response (NaN becomes None); ``ResponseRows`` in ``lazy_response_rows``."""
    names = ["response_id", "system", "domain", "answered", *COUNT_COLUMNS, "n_claims", "n_countable"]
    rows = ResponseRows({**{name: counts[name].to_numpy() for name in names}, **values}, values)
    if not _LAZY_ROWS.get():
        return rows[:]
    if len(rows) >= SPILL_MIN_RESPONSES:
        rows.spill()
    return rows


#: From how many responses the report's build keeps a per-response list on disk until the report is
#: stored (``ResponseRows.spill``), not in memory: a few lists of 100,000 hold 15 MB each as columns.
SPILL_MIN_RESPONSES = 100_000


def _boot(n_resamples: int, seed: int | None, confidence: float) -> Boot:
    return {"n_resamples": n_resamples, "seed": seed, "confidence": confidence}


def factscore(
    claims: pd.DataFrame,
    *,
    supported: Collection,
    unsupported: Collection,
    excluded: Collection = (),
    responses: pd.DataFrame | None = None,
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    **columns: Any,  # column renames (str); Any: mypy would match them against response_codes
) -> dict[str, Any]:
    """FActScore-style supported fraction per response, per system and overall.

    Per system: the mean score with a bootstrap CI over responses, the share
    of responses that answered, mean claims per answered response, and the
    label counts beside every fraction. ``columns`` renames input columns
    (``response=``, ``system=``, ``domain=``, ``label=``).
    """
    counts = response_counts(
        claims, supported=supported, unsupported=unsupported, excluded=excluded, responses=responses, **columns
    )
    known = responses is not None and "answered" in responses.columns
    out, score = _factscore(counts, _boot(n_resamples, seed, confidence), known)
    return {**json_ready(out), "per_response": _per_response(counts, {"score": score})}


def veriscore_f1_at_k(
    claims: pd.DataFrame,
    *,
    supported: Collection,
    unsupported: Collection,
    excluded: Collection = (),
    responses: pd.DataFrame | None = None,
    k: int | Mapping[Hashable, int | None] | None = None,
    k_source: str | Mapping[Hashable, str] = "given",
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    **columns: Any,  # column renames (str); Any: mypy would match them against response_codes
) -> dict[str, Any]:
    """VeriScore F1@K per response, per system within each domain, and per system.

    ``k`` freezes K (one int for every domain, or a mapping domain -> K);
    domains not given (or given None) get the median rule. The K used for
    each domain is reported with how it was obtained (``k_source`` names
    where a given K came from, e.g. another source's median:
    ``veriscore_k_by_domain``), so a later run can pass it back.
    """
    counts = response_counts(
        claims, supported=supported, unsupported=unsupported, excluded=excluded, responses=responses, **columns
    )
    out, prf = _veriscore(counts, k, _boot(n_resamples, seed, confidence), k_source)
    values = {"k": prf[3], "precision": prf[0], "recall": prf[1], "f1_at_k": prf[2]}
    return {**json_ready(out), "per_response": _per_response(counts, values)}


def ragas_faithfulness(
    claims: pd.DataFrame,
    *,
    supported: Collection,
    unsupported: Collection,
    excluded: Collection = (),
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    **columns: Any,  # column renames (str); Any: mypy would match them against response_codes
) -> dict[str, Any]:
    """RAGAS faithfulness: the share of a response's claims supported by its context."""
    counts = response_counts(claims, supported=supported, unsupported=unsupported, excluded=excluded, **columns)
    out, values = _ragas(counts, _boot(n_resamples, seed, confidence))
    return {**json_ready(out), "per_response": _per_response(counts, {"faithfulness": values})}


def claim_scores(
    claims: pd.DataFrame,
    *,
    supported: Collection,
    unsupported: Collection,
    excluded: Collection = (),
    responses: pd.DataFrame | None = None,
    k: int | Mapping[Hashable, int | None] | None = None,
    k_source: str | Mapping[Hashable, str] = "given",
    n_resamples: int = 1000,
    seed: int | None = 0,
    confidence: float = 0.95,
    response_codes: tuple[np.ndarray, Any] | None = None,
    **columns: Any,  # column renames (str); Any: mypy would match them against response_codes
) -> dict[str, Any]:
    """All three scores from one count of the claims, with one merged per-response table.

    The same numbers as ``factscore``, ``veriscore_f1_at_k`` and
    ``ragas_faithfulness`` called one by one (a report needs all three).
    ``response_codes`` as ``response_counts`` takes them.
    """
    counts = response_counts(
        claims,
        supported=supported,
        unsupported=unsupported,
        excluded=excluded,
        responses=responses,
        response_codes=response_codes,
        **columns,
    )
    boot = _boot(n_resamples, seed, confidence)
    known = responses is not None and "answered" in responses.columns
    systems = _by(counts, "system")  # grouped once for the three scores (a factorisation of every response)
    fact, score = _factscore(counts, boot, known, systems)
    veri, prf = _veriscore(counts, k, boot, k_source, systems)
    ragas, faith = _ragas(counts, boot, systems)
    per_response = _per_response(
        counts,
        {
            "factscore": score,
            "k": prf[3],
            "precision": prf[0],
            "recall": prf[1],
            "f1_at_k": prf[2],
            "faithfulness": faith,
        },
    )
    return {
        **json_ready({"factscore": fact, "veriscore": veri, "ragas_faithfulness": ragas}),
        "per_response": per_response,
    }
