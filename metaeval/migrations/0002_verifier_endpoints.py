"""Verifiers name an operator endpoint instead of a free base URL and key variable (issue 10 §1).

What happens to existing LLM verifiers:

- a verifier whose base URL is the base URL of an endpoint in CLAIMLAB_ENDPOINTS
  (at the time the migration runs) now names that endpoint, and its URL is
  cleared: the endpoint's own key variable is used from now on;
- any other LLM verifier keeps its URL as a researcher endpoint without a key:
  it runs only where the operator allows researcher endpoints, to an address
  the policy allows, and never with a server key (its old key variable is dropped);
- imported verifiers and the baselines hold no URL and are unchanged (the demo's
  imported GPT-4 / GPT-3.5 verifiers keep working).
"""

from django.conf import settings
from django.db import migrations, models


def to_endpoints(apps, schema_editor):
    """Point each verifier whose URL is an operator endpoint's at that endpoint (the rest: researcher endpoints)."""
    verifier_model = apps.get_model("metaeval", "Verifier")
    by_url = {spec["base_url"].rstrip("/"): name for name, spec in settings.VERIFIER_ENDPOINTS.items()}
    for verifier in verifier_model.objects.filter(kind="llm").exclude(base_url=""):
        name = by_url.get(verifier.base_url.strip().rstrip("/"))
        if name:
            verifier.endpoint, verifier.base_url = name, ""
            verifier.save(update_fields=["endpoint", "base_url"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0002_export_jobs"),
        ("metaeval", "0001_verifiers"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="verifier",
            name="verifier_llm_has_preset_model_url",
        ),
        migrations.AddField(
            model_name="verifier",
            name="api_key_encrypted",
            field=models.TextField(
                blank=True, default="", editable=False, help_text="Researcher endpoint only: its key, Fernet-encrypted."
            ),
        ),
        migrations.AddField(
            model_name="verifier",
            name="endpoint",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Name of an operator-defined endpoint (CLAIMLAB_ENDPOINTS); empty for a researcher endpoint.",
                max_length=64,
            ),
        ),
        migrations.AlterField(
            model_name="verifier",
            name="base_url",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Researcher endpoint only: its OpenAI-compatible base URL (must pass the address policy).",
                max_length=500,
            ),
        ),
        migrations.RunPython(to_endpoints, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name="verifier",
            name="api_key_env",
        ),
        migrations.AddConstraint(
            model_name="verifier",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("kind", "llm"), _negated=True),
                    models.Q(
                        models.Q(("preset", ""), _negated=True),
                        models.Q(("model", ""), _negated=True),
                        models.Q(
                            models.Q(("endpoint", ""), _negated=True),
                            models.Q(("base_url", ""), _negated=True),
                            _connector="OR",
                        ),
                    ),
                    _connector="OR",
                ),
                name="verifier_llm_has_preset_model_endpoint",
            ),
        ),
    ]
