"""Background tasks of the verifiers (django-tasks API: the database backend by default, RQ to scale out)."""

from __future__ import annotations

from django_tasks import task

from annotation.lib.job_runs import current_worker
from config.request_id import enqueue, task_context

from ..models import ACTIVE_RUN_STATUSES, VerifierRun


@task()
def run_verifier_chunk(run_id: int, generation: int, request_id: str = "") -> dict:
    """One chunk of a verifier run; queues the next chunk itself, so a run is a chain of short tasks.

    Short tasks keep a run stoppable and resumable: a worker killed mid-chunk
    loses only the calls it had in flight, and ``resume_stale_runs`` (or the
    next start of the same verifier) queues the chunk again under a new
    generation, which retires any task of the old chain.
    """
    # First of all, the run is this worker's: killed from here on (an RQ work horse importing the
    # runner, say), the run is resumed within seconds as held by a gone worker, not after its
    # heartbeat went stale (stale_after(), 2 minutes). The previous chunk left its own worker
    # there, so the run is never held by nobody between two chunks.
    VerifierRun.objects.filter(pk=run_id, generation=generation, status__in=ACTIVE_RUN_STATUSES).update(
        worker=current_worker()
    )
    # Imported here, not at the top: the runner needs the openai client (about 1.5 s of
    # imports), and every web process imports this module (the run services queue this
    # task); only the workers that run chunks should pay for it (an RQ worker imports it once,
    # before forking: metaeval.tasks registers it as a preload). No cycle is involved.
    from .runner.orchestration import run_chunk

    with task_context("run_verifier_chunk", request_id):  # the whole chain logs the id of the request that started it
        result = run_chunk(run_id, generation)
        if result.more:
            enqueue(run_verifier_chunk, run_id, generation)
    return result.as_dict()
