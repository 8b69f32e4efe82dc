from django.db import migrations, models


class Migration(migrations.Migration):
    """Studies record how the labels that came with items imported from a pipeline's file were taken:
    as the items' gold labels only, or as an imported annotator's labels taking a slot (issue 29)."""

    dependencies = [
        ("annotation", "0022_claim_rank_checks"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="source_labels",
            field=models.JSONField(
                blank=True,
                db_default=[],
                default=list,
                help_text=(
                    "How the labels that came with items imported from a pipeline's file were taken, one entry per "
                    "pipeline and choice: {from, as: 'gold' (the items' gold labels only) or 'annotator' (an "
                    "imported annotator's labels, one slot each), annotators} (annotation/adapters/source_labels.py)."
                ),
            ),
        ),
    ]
