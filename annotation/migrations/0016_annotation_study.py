"""Annotation.study: the assignment's study copied onto its answer, for the report's data fingerprint.

Filled here, made required in 0017: on PostgreSQL the fill's foreign-key checks are deferred to the
end of the transaction, and a table with pending checks cannot be altered in the same one."""

import django.db.models.deletion
from django.db import migrations, models

#: Plain SQL that both SQLite and PostgreSQL run: every existing answer takes its assignment's study.
FILL = (
    "UPDATE annotation_annotation SET study_id = (SELECT a.study_id FROM annotation_assignment AS a "
    "WHERE a.id = annotation_annotation.assignment_id)"
)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0015_counters"),
    ]

    operations = [
        migrations.AddField(
            model_name="annotation",
            name="study",
            field=models.ForeignKey(
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.study",
            ),
        ),
        migrations.RunSQL(FILL, reverse_sql=migrations.RunSQL.noop),
    ]
