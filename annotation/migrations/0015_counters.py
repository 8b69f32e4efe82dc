"""Counters of the home page and the study overview (services/counters.py), filled for existing studies."""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Count, Max, Q


def fill_counters(apps: Any, schema_editor: Any) -> None:
    """Count every existing study from its rows, as services.counters.recount_study does.

    Written against the historical models (not the service) so that later changes to
    the service cannot change what this migration does.
    """
    Study = apps.get_model("annotation", "Study")
    Item = apps.get_model("annotation", "Item")
    Annotation = apps.get_model("annotation", "Annotation")
    Assignment = apps.get_model("annotation", "Assignment")
    DomainCount = apps.get_model("annotation", "DomainCount")
    AnnotatorCount = apps.get_model("annotation", "AnnotatorCount")
    for study in Study.objects.all().iterator():
        DomainCount.objects.bulk_create(
            DomainCount(study_id=study.pk, domain=row["domain"], items=row["items"], gold=row["gold"])
            for row in Item.objects.filter(study_id=study.pk)
            .values("domain")
            .annotate(items=Count("pk"), gold=Count("pk", filter=~Q(gold_label="")))
            .order_by()
        )
        labels = Annotation.objects.filter(assignment__study_id=study.pk)
        rows = {
            (row["assignment__annotator_id"], row["assignment__item__domain"]): AnnotatorCount(
                study_id=study.pk,
                user_id=row["assignment__annotator_id"],
                domain=row["assignment__item__domain"],
                annotations=row["n"],
            )
            for row in labels.values("assignment__annotator_id", "assignment__item__domain")
            .annotate(n=Count("pk"))
            .order_by()
        }
        last_ids = (
            labels.values("assignment__item_id")
            .annotate(n=Count("pk"), last=Max("assignment_id"))
            .filter(n__gte=study.annotators_per_item)
            .order_by()
            .values_list("last", flat=True)
        )
        completing = Assignment.objects.filter(pk__in=last_ids).values_list("annotator_id", "item__domain")
        for key in completing.iterator():
            rows[key].complete += 1
        AnnotatorCount.objects.bulk_create(rows.values(), batch_size=1000)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0014_study_submit_on_label"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AnnotatorCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("domain", models.CharField(blank=True, default="", max_length=100)),
                ("annotations", models.PositiveIntegerField(default=0)),
                ("complete", models.IntegerField(default=0)),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="annotator_counts",
                        to="annotation.study",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "ordering": ["study", "user", "domain"],
                "constraints": [
                    models.UniqueConstraint(fields=("study", "user", "domain"), name="annotator_count_unique")
                ],
            },
        ),
        migrations.CreateModel(
            name="DomainCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("domain", models.CharField(blank=True, default="", max_length=100)),
                ("items", models.PositiveIntegerField(default=0)),
                ("gold", models.PositiveIntegerField(default=0)),
                (
                    "study",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="domain_counts", to="annotation.study"
                    ),
                ),
            ],
            options={
                "ordering": ["study", "domain"],
                "constraints": [models.UniqueConstraint(fields=("study", "domain"), name="domain_count_unique")],
            },
        ),
        migrations.RunPython(fill_counters, migrations.RunPython.noop),
    ]
