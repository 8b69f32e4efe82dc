from django.db import migrations, models

from annotation.lib.migration_operations import AddIndexWithoutLocking


class Migration(migrations.Migration):
    """A partial index of the labels made here (not imported) by study and time, for the progress page's
    throughput (selectors.label_rate): the last hour's labels, the first and the latest are read through
    it, in time that grows with the last hour's labels, not with the study (issue 35)."""

    atomic = False  # the index is built without blocking writes (annotation/lib/migration_operations.py)

    dependencies = [
        ("annotation", "0035_progress_quality_counters"),
    ]

    operations = [
        AddIndexWithoutLocking(
            model_name="annotation",
            index=models.Index(
                condition=models.Q(("source", "import"), _negated=True),
                fields=["study", "created_at"],
                name="annotation_made_here",
            ),
        ),
    ]
