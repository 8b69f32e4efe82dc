from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("metaeval", "0008_staged_prediction_shape"),
    ]

    operations = [
        migrations.AddField(
            model_name="verifier",
            name="predictions_version",
            field=models.PositiveBigIntegerField(
                db_default=0,
                default=0,
                help_text="Goes up by one in the transaction of every write of the verifier's predictions (an "
                "import's switch, a run's stored batch): the report fingerprint and the verifiers page's counts "
                "read it instead of every prediction (issue 35; verifiers/prediction_version.py).",
            ),
        ),
    ]
