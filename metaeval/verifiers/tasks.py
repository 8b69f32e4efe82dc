"""Background tasks of the verifiers (django-tasks API: the database backend by default, RQ to scale out)."""

from __future__ import annotations

from django_tasks import task

from config.request_id import enqueue, task_context


@task()
def run_verifier_chunk(run_id: int, generation: int, request_id: str = "") -> dict:
    """One chunk of a verifier run; queues the next chunk itself, so a run is a chain of short tasks.

    Short tasks keep a run stoppable and resumable: a worker killed mid-chunk
    loses only the calls it had in flight, and ``resume_stale_runs`` (or the
    next start of the same verifier) queues the chunk again under a new
    generation, which retires any task of the old chain.
    """
    # Imported here, not at the top: the runner needs the openai client (about 1.5 s of
    # imports), and every web process imports this module (the run services queue this
    # task); only the workers that run chunks should pay for it. No cycle is involved.
    from .runner.orchestration import run_chunk

    with task_context("run_verifier_chunk", request_id):  # the whole chain logs the id of the request that started it
        result = run_chunk(run_id, generation)
        if result.more:
            enqueue(run_verifier_chunk, run_id, generation)
    return result.as_dict()
