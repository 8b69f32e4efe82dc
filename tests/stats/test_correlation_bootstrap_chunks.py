"""The system-correlation bootstrap draws its resamples a chunk at a time (issue 35: bounded memory at a million
claims): the same numbers as drawing every resample at once, as the function did before."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pandas as pd
import pytest

from metaeval.stats.system_correlation import spearman_rows, tau_b

# the module, not the function of the same name that metaeval.stats exports
module = importlib.import_module("metaeval.stats.system_correlation")


def all_at_once(responses: pd.DataFrame, systems: list, *, n_resamples: int, seed: int):
    """The bootstrap as written before chunking: one draw of every resample per system."""
    rng = np.random.default_rng(seed)
    human = np.empty((n_resamples, len(systems)))
    verifier = np.empty((n_resamples, len(systems)))
    for column, system in enumerate(systems):
        rows = responses[responses["system"] == system]
        h, v = rows["human"].to_numpy(dtype=np.float64), rows["verifier"].to_numpy(dtype=np.float64)
        idx = rng.integers(0, len(rows), size=(n_resamples, len(rows)))
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            human[:, column] = (
                np.nanmean(np.where(np.isfinite(h[idx]), h[idx], np.nan), axis=1) if np.isfinite(h).any() else np.nan
            )
            verifier[:, column] = (
                np.nanmean(np.where(np.isfinite(v[idx]), v[idx], np.nan), axis=1) if np.isfinite(v).any() else np.nan
            )
    return tau_b(np.round(human, 12), np.round(verifier, 12)), spearman_rows(
        np.round(human, 12), np.round(verifier, 12)
    )


@pytest.mark.parametrize("chunk", [1, 7, 50, 1 << 21])
def test_chunked_draws_equal_one_draw_of_every_resample(monkeypatch, chunk):
    rng = np.random.default_rng(4)
    n = 300
    responses = pd.DataFrame(
        {
            "system": rng.choice(["a", "b", "c", "d"], size=n),
            "human": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
            "verifier": rng.random(n),
        }
    )
    responses.loc[responses["system"] == "d", "human"] = np.nan  # a system without any human score
    monkeypatch.setattr(module, "CHUNK_ELEMENTS", chunk)
    systems = ["a", "b", "c", "d"]
    got = module._correlation_bootstrap(responses, systems, n_resamples=120, seed=9)
    expected = all_at_once(responses, systems, n_resamples=120, seed=9)
    for ours, theirs in zip(got, expected, strict=True):
        np.testing.assert_array_equal(ours, theirs)
