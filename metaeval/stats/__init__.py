"""Claimlab's statistics: pure functions on a long label table, no Django.

A researcher can run them in a notebook on an exported CSV (one row per
rating; a missing rating is an absent row)::

    import pandas as pd
    from metaeval import stats
    df = pd.read_csv("export.csv").rename(columns={"canonical_label": "label"})
    table = stats.build_table(df, ["supported", "contradicted", "inconclusive"])
    print(stats.agreement_summary(table, collapse=stats.VERISCORE_BINARY)["fleiss_kappa"])

Factuality scores (``factscore``, ``veriscore_f1_at_k``, ``ragas_faithfulness``,
``credibility``) take a claim table and return counts beside every fraction.

Every coefficient returns an ``Estimate`` (``value`` is None with a
``reason`` when undefined, ``n_items``, optional ``ci``, ``extra`` counts);
``json_ready`` / ``Estimate.to_dict`` never emit NaN.

``ppi_mean`` corrects a verifier's mean (or share) on many items with human
labels on a few (prediction-powered inference, PPI++); ``labels_needed`` plans
how many human labels it takes.

``compare_verifiers`` compares verifiers on the same items (paired bootstrap
differences, exact McNemar tests, Holm over the pairs); ``leaderboard`` ranks
them by mean balanced accuracy over studies.
"""

from .aggregation import AggregationFit, Ratings, dawid_skene, mace, ratings_from_codes
from .agreement import (
    cohen_kappa,
    consensus_distribution,
    fleiss_kappa,
    fleiss_kappa_generalized,
    full_agreement,
    gwet_ac1,
    krippendorff_alpha,
    label_distribution,
    majority_agreement,
    mean_cohen_kappa,
    pairwise_cohen_kappa,
    percent_agreement,
    randolph_kappa,
)
from .annotator_quality import FLAG_RULE, annotator_quality, kappa_with_ci
from .bootstrap import (
    BOOTSTRAP_STATISTICS,
    BootstrapRequest,
    bootstrap_ci,
    bootstrap_distribution,
    bootstrap_distributions,
    percentile_ci,
)
from .classification import (
    CLASSIFICATION_METRICS,
    classification_bootstrap,
    classification_metrics,
    confusion_metrics,
)
from .conditions import compare_conditions
from .credibility import credibility
from .estimate import Estimate, json_ready
from .pandas_setup import STRING_STORAGE  # noqa: F401  (pins pandas' string storage on import)
from .ppi import (
    labels_needed,
    labels_needed_from_moments,
    ppi_mean,
    ppi_mean_batch,
    ppi_weighted_mean,
    share_moments,
)
from .preference import (
    PREFERENCE_3WAY,
    PREFERENCE_LABELS,
    position_bias,
    preference_counts,
    preference_counts_by,
    sign_test,
    winners,
)
from .questions import long_answers, per_claim_scores, question_agreement, question_distribution
from .scores import (
    MixedResponses,
    claim_scores,
    factscore,
    ragas_faithfulness,
    response_counts,
    response_keys,
    veriscore_f1_at_k,
    veriscore_k,
)
from .summary import agreement_summary, summary_statistics
from .system_correlation import system_correlation
from .table import RatingTable, build_table, collapse_labels, table_from_codes
from .verifier import (
    MajorityVote,
    human_ceiling,
    majority_vote,
    prediction_codes,
    verifier_vs_majority,
)
from .verifier_pairs import compare_verifiers, leaderboard

#: docs/architecture.md, Label vocabularies binary collapse of the VeriScore ternary labels.
VERISCORE_BINARY = {"supported": "supported", "contradicted": "unsupported", "inconclusive": "unsupported"}

__all__ = [
    "MixedResponses",
    "FLAG_RULE",
    "annotator_quality",
    "kappa_with_ci",
    "AggregationFit",
    "Ratings",
    "dawid_skene",
    "mace",
    "ratings_from_codes",
    "BOOTSTRAP_STATISTICS",
    "CLASSIFICATION_METRICS",
    "Estimate",
    "MajorityVote",
    "PREFERENCE_3WAY",
    "PREFERENCE_LABELS",
    "RatingTable",
    "VERISCORE_BINARY",
    "agreement_summary",
    "summary_statistics",
    "bootstrap_ci",
    "bootstrap_distribution",
    "bootstrap_distributions",
    "BootstrapRequest",
    "build_table",
    "table_from_codes",
    "claim_scores",
    "classification_bootstrap",
    "classification_metrics",
    "cohen_kappa",
    "compare_conditions",
    "compare_verifiers",
    "collapse_labels",
    "confusion_metrics",
    "consensus_distribution",
    "credibility",
    "fleiss_kappa",
    "fleiss_kappa_generalized",
    "full_agreement",
    "gwet_ac1",
    "factscore",
    "human_ceiling",
    "json_ready",
    "krippendorff_alpha",
    "label_distribution",
    "leaderboard",
    "long_answers",
    "per_claim_scores",
    "question_agreement",
    "question_distribution",
    "majority_agreement",
    "majority_vote",
    "mean_cohen_kappa",
    "pairwise_cohen_kappa",
    "percent_agreement",
    "percentile_ci",
    "ppi_mean",
    "ppi_mean_batch",
    "ppi_weighted_mean",
    "labels_needed",
    "labels_needed_from_moments",
    "share_moments",
    "position_bias",
    "prediction_codes",
    "ragas_faithfulness",
    "response_counts",
    "response_keys",
    "preference_counts",
    "preference_counts_by",
    "randolph_kappa",
    "sign_test",
    "system_correlation",
    "verifier_vs_majority",
    "veriscore_f1_at_k",
    "veriscore_k",
    "winners",
]
