"""The report's JSON shape, for the OpenAPI schema (the view returns the service's dict as it is)."""

from __future__ import annotations

from rest_framework import serializers


class EstimateSerializer(serializers.Serializer):
    """A statistic: null value with a reason when undefined, the items it rests on, an optional interval."""

    value = serializers.FloatField(allow_null=True)
    reason = serializers.CharField(allow_null=True, help_text="Why the value is undefined (null when defined).")
    n_items = serializers.IntegerField()
    ci = serializers.ListField(
        child=serializers.FloatField(),
        min_length=2,
        max_length=2,
        allow_null=True,
        help_text="Percentile bootstrap interval over items (low, high).",
    )


class PairKappaSerializer(EstimateSerializer):
    annotators = serializers.ListField(child=serializers.CharField(), min_length=2, max_length=2)
    n = serializers.IntegerField(help_text="Items both annotators labelled.")


class LabelDistributionSerializer(serializers.Serializer):
    counts = serializers.DictField(child=serializers.IntegerField())
    shares = serializers.DictField(child=serializers.FloatField(allow_null=True))
    n_ratings = serializers.IntegerField()
    n_items = serializers.IntegerField()


class AgreementSerializer(serializers.Serializer):
    """Every coefficient on one set of labels (ordinal ones only for preference studies)."""

    n_items = serializers.IntegerField()
    n_annotators = serializers.IntegerField()
    n_annotations = serializers.IntegerField()
    categories = serializers.ListField(child=serializers.CharField())
    fleiss_kappa = EstimateSerializer(help_text="Items with all N ratings; n_items_left_out says how many not.")
    fleiss_kappa_generalized = EstimateSerializer()
    krippendorff_alpha = EstimateSerializer()
    krippendorff_alpha_ordinal = EstimateSerializer(required=False)
    krippendorff_alpha_interval = EstimateSerializer(required=False)
    pairwise_cohen_kappa = PairKappaSerializer(many=True)
    mean_cohen_kappa = EstimateSerializer()
    percent_agreement = EstimateSerializer()
    full_agreement = EstimateSerializer()
    majority_agreement = EstimateSerializer()
    gwet_ac1 = EstimateSerializer()
    randolph_kappa = EstimateSerializer()
    consensus = serializers.DictField(child=serializers.IntegerField(), help_text='e.g. {"3-0": 812, "2-1": 170}')
    label_distribution = LabelDistributionSerializer()


class DisagreementSerializer(serializers.Serializer):
    item = serializers.CharField()
    domain = serializers.CharField()
    labels = serializers.DictField(child=serializers.CharField(), help_text="annotator pseudonym -> label")
    pattern = serializers.CharField()
    majority = serializers.CharField(allow_null=True)


class ReportSerializer(serializers.Serializer):
    """A study's meta-evaluation report (issue 4)."""

    study = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.CharField(help_text="preference or verification")
    labels = serializers.ListField(child=serializers.CharField())
    systems = serializers.ListField(child=serializers.CharField())
    options = serializers.DictField()
    n_items = serializers.IntegerField()
    n_items_annotated = serializers.IntegerField()
    n_items_gold = serializers.IntegerField()
    gold_rule = serializers.CharField()
    gold_in_agreement = serializers.BooleanField(
        help_text="The study setting: whether items with a gold label count in agreement and preference analysis."
    )
    n_items_check = serializers.IntegerField(help_text="Items used as attention or qualification checks.")
    checks_rule = serializers.CharField(
        allow_null=True, help_text="How labels on check items are treated, with counts (null: no check items)."
    )
    checks_in_agreement = serializers.BooleanField(
        help_text="The study setting: whether labels check items got as ordinary items count."
    )
    participants_rule = serializers.CharField(
        allow_null=True,
        help_text="Crowd studies: which participants (screened out, withdrawn) and how many labels are left out.",
    )
    source_labels_rule = serializers.CharField(
        allow_null=True,
        help_text=(
            "Studies whose items came from a pipeline's file with the source's own labels: whether those labels "
            "became the items' gold labels only or an imported annotator's labels (import option source_labels)."
        ),
    )
    n_annotators = serializers.IntegerField()
    n_annotations = serializers.IntegerField(help_text="Every label counted (gold items' too).")
    n_annotations_in_agreement = serializers.IntegerField(
        help_text="The labels agreement, preference analysis, disagreements and the charts count (the gold rule)."
    )
    agreement = AgreementSerializer()
    binary = AgreementSerializer(allow_null=True, help_text="With ?binary=true: the binary collapse.")
    by_domain = serializers.DictField(
        child=AgreementSerializer(), allow_null=True, help_text="With ?by_domain=true: agreement per domain."
    )
    preference = serializers.JSONField(
        allow_null=True,
        help_text=(
            "Preference studies: counts per system split strong/slight, per domain, sign tests, position bias, "
            "3-way agreement."
        ),
    )
    scores = serializers.JSONField(
        allow_null=True,
        help_text=(
            "Verification studies: FActScore, VeriScore F1@K (K per domain), RAGAS faithfulness from human "
            "majority and gold verdicts, and Facts&Evidence credibility, each with counts and its rule."
        ),
    )
    human_ceiling = serializers.JSONField(
        help_text=(
            "Each annotator against the strict majority of the other annotators (accuracy, Cohen kappa, macro-F1)."
        )
    )
    disagreements = DisagreementSerializer(many=True)
    n_disagreements = serializers.IntegerField()
    reference = serializers.JSONField(
        help_text=(
            "The reference rule (?reference=: gold, majority, dawid_skene), its sources, and how many items each "
            "source gave a label and how many got none."
        )
    )
    annotator_quality = serializers.JSONField(
        help_text=(
            "Per annotator: Cohen kappa with the reference (bootstrap CI, n), with the majority of the others, gold "
            "accuracy, Dawid-Skene confusion matrix and accuracy, and a flag (flag_rule says when)."
        )
    )
    verifiers_vs_reference = serializers.JSONField(
        help_text="Each claim verifier's accuracy and Cohen kappa (CI) against the reference labels."
    )
    ppi = serializers.JSONField(
        allow_null=True,
        help_text=(
            "Verification studies with a verifier's predictions: per verifier, the share of claims supported by "
            "PPI++ (prediction-powered inference) with its interval, beside the human-only and verifier-only "
            "shares, n labelled and N unlabelled claims; overall, per system and per domain (?ppi_labelled_share= "
            "uses a seeded random share of the labelled claims)."
        ),
    )
    verifier_comparisons = serializers.JSONField(
        allow_null=True,
        help_text=(
            "Two or more claim verifiers: per pair, paired bootstrap differences in balanced accuracy, kappa and "
            "accuracy, and an exact McNemar test, Holm-corrected across pairs."
        ),
    )


class StudyLabelsSerializer(serializers.Serializer):
    """The labels a report counts with their items' reference labels, column by column (one list per column)."""

    study = serializers.CharField()
    reference_rule = serializers.CharField()
    reference_description = serializers.CharField()
    gold_rule = serializers.CharField()
    checks_rule = serializers.CharField(allow_null=True)
    participants_rule = serializers.CharField(allow_null=True)
    n_labels = serializers.IntegerField()
    columns = serializers.DictField(
        child=serializers.ListField(),
        help_text=(
            "item, annotator, label, domain, gold_label, in_agreement (the label counts in agreement), "
            "reference_label and reference_source (null where the rule gives none): one list each, same order."
        ),
    )
