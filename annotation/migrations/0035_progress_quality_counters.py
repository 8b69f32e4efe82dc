"""The progress page's annotator table as counters (issue 35): new AnnotatorCount columns and the active-time
sketch's rows (ActiveTimeBucket), filled for existing studies (0036 adds the index of the labels made here)."""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models, transaction
from django.db.models import Count, F, Q

from annotation.lib.active_time_sketch import bucket_sql

#: vocab.ABSTAIN_LABELS as of this migration.
ABSTAIN_LABELS = ("both_bad", "inconclusive")
COUNTS = ("timed", "abstained", "gold_n", "gold_correct", "imported", "skipped", "timed_out")


def fill_quality(apps: Any, schema_editor: Any) -> None:
    """Count every existing study's annotator table from its rows, as counters.recount_study does, a
    study per transaction (the previous release serves meanwhile: its submits wait on a study's
    counter rows only while that study is counted; what it writes meanwhile without these counts
    is counted by `manage.py recount_study --all` once the new release serves everywhere).

    Written against the historical models (not the service), so that later changes to the service
    cannot change what this migration does; the buckets are those of lib/active_time_sketch.py.
    """
    Study = apps.get_model("annotation", "Study")
    Annotation = apps.get_model("annotation", "Annotation")
    Assignment = apps.get_model("annotation", "Assignment")
    ActiveTimeBucket = apps.get_model("annotation", "ActiveTimeBucket")
    connection = schema_editor.connection
    quote = connection.ops.quote_name
    annotation, assignment = quote(Annotation._meta.db_table), quote(Assignment._meta.db_table)
    buckets = (
        f"INSERT INTO {quote(ActiveTimeBucket._meta.db_table)} (study_id, user_id, bucket, labels) "
        "SELECT t.study_id, t.user_id, t.bucket, COUNT(*) FROM (SELECT a.study_id AS study_id, "
        f"a.annotator_id AS user_id, {bucket_sql('n.active_ms')} AS bucket FROM {annotation} AS n "
        f"JOIN {assignment} AS a ON a.id = n.assignment_id WHERE a.study_id = %s AND n.active_ms IS NOT NULL) AS t "
        "GROUP BY t.study_id, t.user_id, t.bucket"
    )
    for study_id in Study.objects.order_by("pk").values_list("pk", flat=True).iterator():
        with transaction.atomic(using=connection.alias):
            _fill_study(apps, study_id)
            ActiveTimeBucket.objects.filter(study_id=study_id).delete()
            with connection.cursor() as cursor:
                cursor.execute(buckets, [study_id])


def _fill_study(apps: Any, study_id: int) -> None:
    """One study's counter columns from its labels and skipped assignments."""
    Annotation = apps.get_model("annotation", "Annotation")
    Assignment = apps.get_model("annotation", "Assignment")
    Participant = apps.get_model("annotation", "Participant")
    AnnotatorCount = apps.get_model("annotation", "AnnotatorCount")
    rows: dict[tuple[int, str], dict[str, int]] = {}
    gold = ~Q(assignment__item__gold_label="")
    labels = (
        Annotation.objects.filter(assignment__study_id=study_id)
        .values("assignment__annotator_id", "assignment__item__domain")
        .annotate(
            timed=Count("active_ms"),
            abstained=Count("pk", filter=Q(label__in=ABSTAIN_LABELS)),
            gold_n=Count("pk", filter=gold),
            gold_correct=Count("pk", filter=gold & Q(label=F("assignment__item__gold_label"))),
            imported=Count("pk", filter=Q(source="import")),
        )
        .order_by()
    )
    for row in labels:
        key = (row["assignment__annotator_id"], row["assignment__item__domain"])
        rows[key] = {name: row[name] for name in COUNTS[:5]}
    participants = Participant.objects.filter(study_id=study_id).values("member__user_id")
    skips = (
        Assignment.objects.filter(study_id=study_id, status="skipped")
        .values("annotator_id", "item__domain")
        .annotate(
            skipped=Count("pk", filter=Q(lease_expires_at__isnull=True) & ~Q(annotator_id__in=participants)),
            timed_out=Count("pk", filter=Q(lease_expires_at__lt=F("updated_at"))),
        )
        .order_by()
    )
    for row in skips:
        if row["skipped"] or row["timed_out"]:
            counts = rows.setdefault((row["annotator_id"], row["item__domain"]), {})
            counts.update(skipped=row["skipped"], timed_out=row["timed_out"])
    for (user_id, domain), counts in rows.items():
        AnnotatorCount.objects.update_or_create(
            study_id=study_id, user_id=user_id, domain=domain, defaults={name: counts.get(name, 0) for name in COUNTS}
        )


class Migration(migrations.Migration):
    atomic = False  # the fill counts a study per transaction (the previous release serves meanwhile)

    dependencies = [
        ("annotation", "0034_exportjob_prediction_formats"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ActiveTimeBucket",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("bucket", models.SmallIntegerField()),
                ("labels", models.PositiveIntegerField(db_default=0, default=0)),
            ],
            options={
                "ordering": ["study", "user", "bucket"],
            },
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="abstained",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="gold_correct",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="gold_n",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="imported",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="skipped",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="timed",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="annotatorcount",
            name="timed_out",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="annotatorcount",
            name="annotations",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="annotatorcount",
            name="complete",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="activetimebucket",
            name="study",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to="annotation.study"
            ),
        ),
        migrations.AddField(
            model_name="activetimebucket",
            name="user",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
            ),
        ),
        migrations.AddConstraint(
            model_name="activetimebucket",
            constraint=models.UniqueConstraint(fields=("study", "user", "bucket"), name="active_time_bucket_unique"),
        ),
        migrations.RunPython(fill_quality, migrations.RunPython.noop),
    ]
