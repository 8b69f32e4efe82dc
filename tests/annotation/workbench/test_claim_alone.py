"""The claim without a transaction (PostgreSQL: workbench/services._claim_alone) keeps the claim's rules.

It is two statements: the candidates, then one statement that locks the user's membership itself
(assignment_sql.claim_first_free_slot with `alone`). Its guard lets it go on only while no other
claim of the user committed since its snapshot and the user holds no active assignment; otherwise
it writes nothing and the claim is made in a transaction, as before.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Assignment, Item, StudyMember
from annotation.workbench import assignment_sql
from annotation.workbench.services import _assignment_values, _ranked, claim_next, lease_length
from tests.support.assignment_study import make_study

ON_POSTGRES = connection.vendor == "postgresql"


def _claim_alone_statement(study, user, item: Item):
    """The one-statement claim of `item` for `user`, made alone."""
    now = timezone.now()
    values = _assignment_values(user, study, now + lease_length(), now)
    return assignment_sql.claim_first_free_slot([(item.pk, 0, 0)], values, study.systems, 3, alone=True)


@pytest.mark.django_db
def test_a_claim_alone_by_a_user_who_holds_an_item_writes_nothing():
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"  # SQLite claims in its (serialised) transaction only
        return
    study, (a1, *_) = make_study(items=4, slug="holds")
    held = claim_next(user=a1, study=study)
    other = Item.objects.filter(study=study).exclude(pk=held.item_id).first()
    member_version = StudyMember.objects.filter(study=study, user=a1).values_list("is_active", flat=True).get()
    with pytest.raises(assignment_sql.NotAlone):
        _claim_alone_statement(study, a1, other)
    assert list(Assignment.objects.filter(annotator=a1).values_list("pk", flat=True)) == [held.pk]
    assert Item.objects.get(pk=other.pk).slots_taken == 0 and member_version is True


@pytest.mark.django_db
def test_a_claim_alone_by_someone_who_is_not_an_active_annotator_writes_nothing():
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"
        return
    study, (a1, *_) = make_study(items=2, slug="left")
    StudyMember.objects.filter(study=study, user=a1).update(is_active=False)
    item = Item.objects.filter(study=study).first()
    with pytest.raises(assignment_sql.NotAlone):
        _claim_alone_statement(study, a1, item)
    assert not Assignment.objects.filter(annotator=a1).exists() and Item.objects.get(pk=item.pk).slots_taken == 0


@pytest.mark.django_db(transaction=True)
def test_a_claim_alone_that_waited_for_another_claim_of_the_same_user_gives_way_to_it():
    """The other claim committed after the statement's snapshot: the statement's "holds nothing" is stale, so
    it writes nothing and the claim is made in a transaction, which hands out the item the other claim took."""
    if not ON_POSTGRES:
        assert connection.vendor == "sqlite"
        return
    study, (a1, *_) = make_study(items=6, slug="race")
    now = timezone.now()
    results: list = []
    failures: list[BaseException] = []

    def second_tab() -> None:
        try:
            results.append(claim_next(user=a1, study=study))
        except BaseException as error:  # re-raised in the test's thread
            failures.append(error)
        finally:
            connection.close()

    with transaction.atomic():  # the first tab's claim, in its transaction, holding the member lock
        assert assignment_sql.annotator_member_id(study.pk, a1.pk, lock=True) is not None
        # the item the second tab would choose last: it would claim another one if it went on alone
        ranked = list(Item.objects.filter(study=study).values_list("pk", "external_id", "slots_taken"))
        _ranked(a1, study, ranked)
        item = Item.objects.get(pk=ranked[-1][0])
        first = assignment_sql.create_assignment(
            {
                **_assignment_values(a1, study, now + lease_length(), now),
                "item_id": item.pk,
                "slot": 0,
                "queue_position": 0,
                "left_system": "",
            }
        )
        Item.objects.filter(pk=item.pk).update(slots_taken=1)
        thread = threading.Thread(target=second_tab)
        thread.start()
        deadline = time.monotonic() + 10
        with connection.cursor() as cursor:
            while time.monotonic() < deadline:  # until the second tab's statement waits for the member lock
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    break
                time.sleep(0.01)
            else:
                pytest.fail("the second claim never waited for the first one's member lock")
    thread.join(30)
    assert not thread.is_alive() and not failures, failures
    assert results[0].pk == first.pk  # the first tab's item, not a second one
    assert list(Assignment.objects.filter(annotator=a1, status="active").values_list("pk", flat=True)) == [first.pk]
    assert sum(Item.objects.filter(study=study).values_list("slots_taken", flat=True)) == 1
