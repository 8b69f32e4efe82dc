"""Label aggregation models: one estimated true label per item from many noisy ones.

Two published models, both fitted by EM on a long table (``item``,
``annotator``, ``label``; one row per rating, repeated ratings by one
annotator allowed, as in Dawid & Skene's own data):

* :func:`dawid_skene` - Dawid & Skene (1979), "Maximum Likelihood Estimation
  of Observer Error-Rates Using the EM Algorithm", Applied Statistics 28(1).
  Every annotator has a full confusion matrix; initialised from the vote
  shares (the paper's eq. 3.1), then M-step / E-step until the
  log-likelihood gains less than ``tol``.
* :func:`mace` - MACE (Hovy, Berg-Kirkpatrick, Vaswani & Hovy 2013,
  "Learning Whom to Trust with MACE", NAACL), fitted by **EM** (the paper's
  first estimator, not its variational-Bayes variant): every annotator
  answers the truth with probability ``competence`` and otherwise "spams" a
  label from their own distribution; the true label has a uniform prior.
  Like the published tool it restarts from random points (a fixed seed)
  and keeps the fit with the highest log-likelihood.

Both return per-item posteriors, the most likely label, and convergence
information (iterations, whether ``tol`` was reached, final log-likelihood),
so a report can say when a fit did not converge.

Neither model has a parameter per item, so the EM steps run once per distinct
rating pattern (who gave which label how often), weighted by how many items
share it, and each item takes its pattern's posterior (``Ratings.patterns``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
from scipy import sparse

from .table import packed_rows

__all__ = ["AggregationFit", "Ratings", "dawid_skene", "mace", "ratings_from_codes"]

_EPS = 1e-12


@dataclass(frozen=True)
class AggregationFit:
    """A fitted aggregation model: posteriors per item, parameters per annotator."""

    method: str
    categories: tuple
    posteriors: pd.DataFrame  # items x categories, rows sum to 1
    annotator_accuracy: pd.Series  # estimated P(annotator's label == truth)
    log_likelihood: float
    n_iter: int
    converged: bool
    confusion: dict[Hashable, pd.DataFrame] = field(default_factory=dict)  # DS: true (rows) x given
    competence: pd.Series | None = None  # MACE: P(not spamming)
    priors: pd.Series | None = None

    @property
    def labels(self) -> pd.Series:
        """The most likely label per item (ties broken by category order)."""
        return pd.Series(
            [self.categories[i] for i in self.posteriors.to_numpy().argmax(axis=1)],
            index=self.posteriors.index,
            name="label",
        )

    @property
    def confidence(self) -> pd.Series:
        """Posterior probability of the most likely label, per item."""
        return self.posteriors.max(axis=1).rename("confidence")

    def convergence(self) -> dict:
        """JSON-ready convergence information."""
        return {
            "method": self.method,
            "n_iter": self.n_iter,
            "converged": self.converged,
            "log_likelihood": float(self.log_likelihood),
        }


@dataclass(frozen=True, eq=False)
class Ratings:
    """The label table as three code arrays (one entry per rating), never a dense items x annotators tensor.

    Items and annotators are numbered in the sorted order of their names (``_encode``'s factorisation);
    ``ratings_from_codes`` makes the same arrays from codes a caller already holds.
    """

    item: np.ndarray
    annotator: np.ndarray
    label: np.ndarray
    items: pd.Index
    annotators: pd.Index
    categories: tuple

    @property
    def shape(self) -> tuple[int, int, int]:
        return len(self.items), len(self.annotators), len(self.categories)

    def per_annotator_label(self, weights: np.ndarray) -> np.ndarray:
        """Sum ``weights`` (one per rating) per (annotator, given label): annotators x K."""
        _, n_ann, k = self.shape
        return np.bincount(self.annotator * k + self.label, weights, minlength=n_ann * k).reshape(n_ann, k)

    @cached_property
    def counts(self) -> sparse.csr_matrix:
        """Items x (annotator, given label): how often each item got each label from each annotator."""
        n_items, n_ann, k = self.shape
        ones = np.ones(len(self.item))
        matrix = sparse.csr_matrix((ones, (self.item, self.annotator * k + self.label)), shape=(n_items, n_ann * k))
        matrix.sum_duplicates()  # canonical rows (sorted, no repeats): equal rows are equal patterns
        return matrix

    @cached_property
    def patterns(self) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
        """The distinct rows of ``counts`` (who gave which label how often), their multiplicities,
        and each item's row among them.

        Why: in both EM models an item's posterior depends only on that row, so items with the
        same row share one posterior, and the E and M steps can run once per distinct row, weighted
        by how many items have it. Three annotators and three labels make at most 27 rows, however
        many items there are (a 100,000-item report spent seconds here). Each step is then one sparse
        product of this matrix with a (annotator, label) x K table."""
        matrix = self.counts
        keyed = _row_keys(matrix)
        if keyed is not None:
            # one integer per row: distinct rows by np.unique, numbered by first appearance as below
            _, first_rows, inverse = np.unique(keyed, return_index=True, return_inverse=True)
            order = np.argsort(first_rows)
            renumber = np.empty_like(order)
            renumber[order] = np.arange(len(order))
            inverse = renumber[inverse.reshape(-1)]
            return matrix[first_rows[order]], np.bincount(inverse, minlength=len(order)).astype(float), inverse
        data, indices, indptr = matrix.data, matrix.indices, matrix.indptr
        seen: dict[bytes, int] = {}
        inverse = np.empty(matrix.shape[0], dtype=np.int64)
        first: list[int] = []
        for row, (lo, hi) in enumerate(zip(indptr[:-1].tolist(), indptr[1:].tolist(), strict=True)):
            key = indices[lo:hi].tobytes() + data[lo:hi].tobytes()  # 4 + 8 bytes per entry: unambiguous
            number = seen.setdefault(key, len(first))
            if number == len(first):
                first.append(row)
            inverse[row] = number
        return matrix[first], np.bincount(inverse, minlength=len(first)).astype(float), inverse

    def per_pattern_of(self, table: np.ndarray) -> np.ndarray:
        """For ``table[a, j, l]`` (annotator, truth, given label): patterns x K sums over each pattern's
        ratings of ``table[annotator, :, label]``."""
        n_ann, k, _ = table.shape
        return np.asarray(self.patterns[0] @ table.transpose(0, 2, 1).reshape(n_ann * k, k))

    def per_annotator_label_of(self, post: np.ndarray) -> np.ndarray:
        """For patterns x K ``post``: ``out[a, l, j]`` = the sum of ``post[item, j]`` over annotator a's
        ratings with label l, over every item (each pattern counted as often as items have it)."""
        _, n_ann, k = self.shape
        rows, weights, _ = self.patterns
        return np.asarray(rows.T @ (post * weights[:, None])).reshape(n_ann, k, k)

    def item_mean(self, post: np.ndarray) -> np.ndarray:
        """The mean over items of patterns x K ``post``."""
        weights = self.patterns[1]
        return weights @ post / weights.sum()

    def per_item(self, post: np.ndarray) -> np.ndarray:
        """Patterns x K ``post`` as items x K."""
        return post[self.patterns[2]]


#: Widest (annotator, label) row that ``_row_keys`` packs into one integer (3 annotators x 3 labels is 9).
_KEYED_COLUMNS = 62


def _row_keys(matrix: sparse.csr_matrix) -> np.ndarray | None:
    """Each row of a small count matrix as one integer (equal rows, equal keys); None when too wide.

    Why: numbering distinct rows one row at a time in Python cost 0.12 s per EM model at
    100,000 items; a few annotators' rows fit one int64 (a crowd's do not, and keep the loop).
    """
    if matrix.shape[0] == 0 or matrix.shape[1] > _KEYED_COLUMNS:  # a crowd's matrix is not made dense
        return None
    packed = packed_rows(matrix.toarray())
    return None if packed is None else packed[0]


def _encode(df: pd.DataFrame, categories: Sequence[Hashable] | None, item: str, annotator: str, label: str) -> Ratings:
    """Code arrays from a long table; undeclared labels and missing columns are named."""
    missing = [c for c in (item, annotator, label) if c not in df.columns]
    if missing:
        raise ValueError(f"label table lacks columns {missing!r}")
    df = df.loc[df[label].notna()]
    if df.empty:
        raise ValueError("no labels to aggregate")
    cats = tuple(categories) if categories is not None else tuple(sorted(pd.unique(df[label]).tolist()))
    lab = pd.Index(list(cats)).get_indexer(df[label])
    if (lab < 0).any():
        unknown = sorted({str(v) for v in df[label][lab < 0]})[:10]
        raise ValueError(f"labels not in the declared categories {list(cats)!r}: {unknown!r}")
    it, items = pd.factorize(df[item], sort=True)
    an, anns = pd.factorize(df[annotator], sort=True)
    return Ratings(
        item=it.astype(np.int64),
        annotator=an.astype(np.int64),
        label=lab.astype(np.int64),
        items=pd.Index(items, name=item),
        annotators=pd.Index(anns, name=annotator),
        categories=cats,
    )


def ratings_from_codes(
    item_code: np.ndarray,
    items: pd.Index,
    annotator_code: np.ndarray,
    annotators: pd.Index,
    label_code: np.ndarray,
    categories: Sequence[Hashable],
) -> Ratings:
    """The ``Ratings`` that ``_encode`` gives for ratings whose items and annotators are already codes.

    ``items`` and ``annotators`` hold distinct names; ``item_code`` / ``annotator_code`` index them and
    ``label_code`` indexes ``categories`` (every rating on the scale). Both are renumbered in the sorted
    order of their names, as ``_encode``'s ``pd.factorize(..., sort=True)`` numbers them, keeping only the
    names that have a rating, so every fit is the same. Why: the report holds its labels as codes into
    its items (``metaeval.label_rows``); factorising 300,000 item names again cost 0.25 s per model.
    """
    cats = tuple(categories)
    label_code = np.asarray(label_code, dtype=np.int64)
    if len(label_code) == 0:
        raise ValueError("no labels to aggregate")
    if not 0 <= label_code.min() <= label_code.max() < len(cats):
        raise ValueError(f"label codes outside the {len(cats)} categories {list(cats)!r}")
    it, item_index = _sorted_codes(np.asarray(item_code, dtype=np.int64), items)
    an, annotator_index = _sorted_codes(np.asarray(annotator_code, dtype=np.int64), annotators)
    return Ratings(
        item=it, annotator=an, label=label_code, items=item_index, annotators=annotator_index, categories=cats
    )


def _sorted_codes(codes: np.ndarray, names: pd.Index) -> tuple[np.ndarray, pd.Index]:
    """``codes`` renumbered 0, 1, ... in the sorted order of the names they use, and those names (in that order)."""
    used = np.flatnonzero(np.bincount(codes, minlength=len(names)))
    by_name = used[np.argsort(np.asarray(names.take(used), dtype=object), kind="stable")]
    renumber = np.empty(len(names), dtype=np.int64)
    renumber[by_name] = np.arange(len(by_name), dtype=np.int64)
    return renumber[codes], names.take(by_name)


def _ratings(
    df: pd.DataFrame | Ratings, categories: Sequence[Hashable] | None, item: str, annotator: str, label: str
) -> Ratings:
    if not isinstance(df, Ratings):
        return _encode(df, categories, item, annotator, label)
    if categories is not None and tuple(categories) != df.categories:
        raise ValueError("categories given for encoded ratings differ from their categories")
    return df


def _normalise_log(log_joint: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, float]:
    """Posteriors from unnormalised log joints (one row per pattern), and the log-likelihood summed
    over items (each pattern's ``weights`` times)."""
    # Column by column: with few categories, NumPy's reductions along the short axis of an
    # items x K array are several times slower than K elementwise passes (the EM loops call
    # this hundreds of times on a big study). exp(x - norm) = exp(x - top) / total: one exp.
    columns = log_joint.T
    top = columns[0].copy()
    for column in columns[1:]:
        np.maximum(top, column, out=top)
    shifted = np.exp(log_joint - top[:, None])
    total = shifted[:, 0].copy()
    for column in shifted.T[1:]:
        total += column
    shifted /= total[:, None]
    return shifted, float((top + np.log(total)) @ weights)


def _ds_e_step(r: Ratings, priors: np.ndarray, errors: np.ndarray) -> tuple[np.ndarray, float]:
    """Posteriors T[i, j] and the log-likelihood; errors[a, j, l] = P(a says l | truth j)."""
    log_err = np.log(np.clip(errors, _EPS, None))  # a x j x l: log P(says l | truth j)
    return _normalise_log(np.log(np.clip(priors, _EPS, None))[None, :] + r.per_pattern_of(log_err), r.patterns[1])


def _ds_m_step(r: Ratings, post: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Class priors and row-normalised confusion matrices from soft labels (one row per pattern)."""
    priors = r.item_mean(post)
    errors = r.per_annotator_label_of(post).transpose(0, 2, 1)  # a x j x l: soft counts of (truth j, says l)
    sums = errors.sum(axis=2, keepdims=True)
    errors = np.divide(errors, sums, out=np.zeros_like(errors), where=sums > 0)
    return priors, errors


def dawid_skene(
    df: pd.DataFrame | Ratings,
    categories: Sequence[Hashable] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    label: str = "label",
    max_iter: int = 100,
    tol: float = 1e-5,
) -> AggregationFit:
    """Dawid-Skene EM: confusion matrix per annotator, posterior per item (``df``: a long table, or its ``Ratings``)."""
    r = _ratings(df, categories, item, annotator, label)
    items, anns, cats = r.items, r.annotators, r.categories
    n_ann, k = len(anns), len(cats)
    shares = np.asarray(r.patterns[0] @ np.tile(np.eye(k), (n_ann, 1)))  # patterns x K: votes per label
    post = shares / shares.sum(axis=1, keepdims=True)
    loglik = -np.inf
    converged = False
    n_iter = 0
    while n_iter < max_iter:
        n_iter += 1
        priors, errors = _ds_m_step(r, post)
        post, new_loglik = _ds_e_step(r, priors, errors)
        if new_loglik - loglik < tol:
            loglik = new_loglik
            converged = True
            break
        loglik = new_loglik
    # the reported parameters are the ones the final posteriors imply (as crowd-kit reports them)
    priors, errors = _ds_m_step(r, post)
    # accuracy = sum_j prior_j * P(says j | truth j), over labels the annotator gave
    accuracy = np.einsum("j,ajj->a", priors, errors)
    confusion = {a: pd.DataFrame(errors[k], index=list(cats), columns=list(cats)) for k, a in enumerate(anns)}
    return AggregationFit(
        method="dawid_skene",
        categories=cats,
        posteriors=pd.DataFrame(r.per_item(post), index=items, columns=list(cats)),
        annotator_accuracy=pd.Series(accuracy, index=anns, name="accuracy"),
        log_likelihood=loglik,
        n_iter=n_iter,
        converged=converged,
        confusion=confusion,
        priors=pd.Series(priors, index=list(cats), name="prior"),
    )


def _mace_fit(
    r: Ratings, theta: np.ndarray, spam: np.ndarray, max_iter: int, tol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int, bool]:
    """One EM run of MACE from a starting point; returns posteriors, params, loglik, iters, converged."""
    _, _, k = r.shape
    eye = np.eye(k)
    loglik = -np.inf
    per_label = r.per_annotator_label(np.ones(len(r.item)))  # a x l: ratings given
    ratings = per_label.sum(axis=1)
    post = np.zeros((len(r.patterns[1]), k))
    for n_iter in range(1, max_iter + 1):
        # P(label l | truth t) for annotator a: theta*[l == t] + (1 - theta) * spam[a, l]
        emit = theta[:, None, None] * eye[None] + (1 - theta)[:, None, None] * spam[:, None, :]
        log_emit = np.log(np.clip(emit, _EPS, None))
        post, new_loglik = _normalise_log(np.log(1.0 / k) + r.per_pattern_of(log_emit), r.patterns[1])
        # expected "told the truth" mass of each rating: P(T = l | data) * theta / emit(l | l),
        # summed per (annotator, label l): the posterior of truth l over those ratings, times a x l factors
        truthful = theta[:, None] / np.clip(np.einsum("att->at", emit), _EPS, None)  # a x l
        known = np.einsum("all->al", r.per_annotator_label_of(post)) * truthful
        theta = np.clip(known.sum(axis=1) / np.clip(ratings, _EPS, None), 1e-6, 1 - 1e-6)
        spam_mass = np.clip(per_label - known, 0, None)
        sums = spam_mass.sum(axis=1, keepdims=True)
        spam = np.where(sums > _EPS, spam_mass / np.clip(sums, _EPS, None), 1.0 / k)
        if abs(new_loglik - loglik) < tol:
            return post, theta, spam, new_loglik, n_iter, True
        loglik = new_loglik
    return post, theta, spam, loglik, max_iter, False


def mace(
    df: pd.DataFrame | Ratings,
    categories: Sequence[Hashable] | None = None,
    *,
    item: str = "item",
    annotator: str = "annotator",
    label: str = "label",
    restarts: int = 10,
    seed: int = 0,
    max_iter: int = 200,
    tol: float = 1e-6,
) -> AggregationFit:
    """MACE competence by EM with random restarts (best log-likelihood wins; ``df``: a long table, or its ``Ratings``)."""
    r = _ratings(df, categories, item, annotator, label)
    items, anns, cats = r.items, r.annotators, r.categories
    rng = np.random.default_rng(seed)
    n_ann, k = len(anns), len(cats)
    best: tuple | None = None
    for _ in range(max(restarts, 1)):
        theta0 = rng.uniform(0.5, 0.95, n_ann)
        spam0 = rng.dirichlet(np.ones(k), n_ann)
        fit = _mace_fit(r, theta0, spam0, max_iter, tol)
        if best is None or fit[3] > best[3]:
            best = fit
    assert best is not None
    post, theta, spam, loglik, n_iter, converged = best
    # accuracy = theta + (1 - theta) * P(a spammed label happens to be the truth)
    hit = np.einsum("al,l->a", spam, r.item_mean(post))
    accuracy = theta + (1 - theta) * hit
    return AggregationFit(
        method="mace_em",
        categories=cats,
        posteriors=pd.DataFrame(r.per_item(post), index=items, columns=list(cats)),
        annotator_accuracy=pd.Series(accuracy, index=anns, name="accuracy"),
        log_likelihood=loglik,
        n_iter=n_iter,
        converged=converged,
        competence=pd.Series(theta, index=anns, name="competence"),
    )
