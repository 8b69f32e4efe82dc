from django.db import DEFAULT_DB_ALIAS, migrations, models, transaction
from django.utils import timezone

from annotation.lib.migration_operations import AddIndexWithoutLocking, RemoveIndexWithoutLocking
from annotation.lib.randomisation import claim_rank

#: Items per transaction: the previous release serves during `migrate`, and a batch's items stay
#: locked (their claims step over them) only while that batch is written.
BATCH = 5_000


def rank_and_mark(apps, schema_editor) -> None:
    """Draw every existing item's claim rank from its study's seed and mark the items the studies'
    participant links use as checks, a batch of items per transaction."""
    item_model = apps.get_model("annotation", "Item")
    study_model = apps.get_model("annotation", "Study")
    link_model = apps.get_model("annotation", "ParticipantLink")
    alias = schema_editor.connection.alias if schema_editor is not None else DEFAULT_DB_ALIAS
    seeds = dict(study_model.objects.using(alias).values_list("pk", "seed"))
    rows = item_model.objects.using(alias).order_by("pk").values_list("pk", "study_id", "external_id")
    after = 0
    while batch := list(rows.filter(pk__gt=after)[:BATCH]):
        with transaction.atomic(using=alias):
            item_model.objects.using(alias).bulk_update(
                [item_model(pk=pk, claim_rank=claim_rank(seeds[study], external)) for pk, study, external in batch],
                ["claim_rank"],
            )
        after = batch[-1][0]
    for study_id, qualification, attention in link_model.objects.using(alias).values_list(
        "study_id", "qualification_items", "attention_items"
    ):
        checks = {*(qualification or []), *(attention or [])}
        if checks:
            with transaction.atomic(using=alias):
                items = item_model.objects.using(alias).filter(study_id=study_id, external_id__in=checks)
                items.update(is_check=True)
                _take_back_leases(apps, alias, list(items.values_list("pk", flat=True)))


def _take_back_leases(apps, alias: str, item_ids: list[int]) -> None:
    """Close the active leases on items that are now checks, as leases that ran out (slot given back):
    the claim hands out held and expired leases before fresh items, so one left open would serve a
    check as an ordinary item (services/participants._take_back_leases does the same from then on)."""
    assignment_model = apps.get_model("annotation", "Assignment")
    item_model = apps.get_model("annotation", "Item")
    active = assignment_model.objects.using(alias).filter(item_id__in=item_ids, status="active")
    for item_id in set(active.values_list("item_id", flat=True)):
        closed = active.filter(item_id=item_id).update(status="skipped", slot=None, updated_at=timezone.now())
        item = item_model.objects.using(alias).select_for_update().get(pk=item_id)
        item.slots_taken = max(item.slots_taken - closed, 0)
        item.save(update_fields=["slots_taken"])


class Migration(migrations.Migration):
    """Items get a per-study random rank that the claim's index walk orders by within a level of
    slots taken, so the order in which items are started is a random permutation of the study
    (issue 29: a study stopped part-way had labelled the end of its file), and a mark for items
    used as attention or qualification checks, which are never handed out as items.

    The ranks are written in batches and the index built and dropped concurrently on PostgreSQL,
    so the running release's annotators keep claiming and submitting during `migrate`."""

    atomic = False

    dependencies = [
        ("annotation", "0021_item_answers"),
    ]

    operations = [
        migrations.AddField(
            model_name="study",
            name="checks_in_agreement",
            field=models.BooleanField(
                default=False,
                help_text=(
                    "Include the labels that items used as attention or qualification checks got as ordinary items "
                    "(before they became checks) in agreement and the other analyses; off: checks only score people."
                ),
            ),
        ),
        migrations.AddField(
            model_name="item",
            name="claim_rank",
            field=models.BigIntegerField(
                db_default=0,  # the release serving during `migrate` inserts items without it
                default=0,
                help_text=(
                    "Where the item stands among items equally far along when fresh slots are handed out: a keyed "
                    "hash of (study seed, item), so the order across the study is a random permutation "
                    "(randomisation.claim_rank)."
                ),
            ),
        ),
        migrations.AddField(
            model_name="item",
            name="is_check",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Used as an attention or qualification check (ParticipantLink): never handed out as an item.",
            ),
        ),
        migrations.RunPython(rank_and_mark, migrations.RunPython.noop),
        AddIndexWithoutLocking(
            model_name="item",
            index=models.Index(
                fields=["study", "is_check", "slots_taken", "claim_rank"], name="item_study_claim_order"
            ),
        ),
        RemoveIndexWithoutLocking(model_name="item", name="item_study_slots"),
    ]
