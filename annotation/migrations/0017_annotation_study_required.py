"""Annotation.study required (filled in 0016), and the index the report's data fingerprint reads."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0016_annotation_study"),
    ]

    operations = [
        migrations.AlterField(
            model_name="annotation",
            name="study",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="annotation.study",
            ),
        ),
        migrations.AddIndex(
            model_name="annotation",
            index=models.Index(fields=["study", "updated_at", "id"], name="annotation_study_fingerprint"),
        ),
    ]
