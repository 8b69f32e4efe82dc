"""The background worker: django-tasks-db's worker made to survive a locked database, or RQ's worker.

`manage.py worker` is the one command for either task backend (settings.TASKS):
the database backend runs `LockTolerantWorker` below, the RQ backend
(django-tasks-rq, tasks on Redis) runs `run_rq_worker`.

Why not the stock `db_worker`: when SQLite's write lock outlasts the busy
timeout while the worker records a task's outcome (`set_successful` /
`set_failed` retry three times, 0.1 s apart, then raise), the exception leaves
its loop and the process exits; every later job then stays queued. Here the
outcome is saved with the jobs' own backoff (job_runs.retry_on_db_fault), and
a passing database fault that still escapes one turn of the loop (a lock, or a
connection lost to a database restart: lib/dblocks.database_fault) is logged and the
loop goes on after a pause. Any other error still stops the worker, as before. And an
idle worker here waits for a queued task's notification (task_wakeup) instead of
sleeping its whole interval. Either worker registers itself (job_runs.WorkerRegistration) and,
at start and every few seconds while idle, re-queues the work of gone workers
(job_runs.recover_lost_work): no cron is needed.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import random
import time
from functools import partial
from typing import Any

import redis
from django.db import DatabaseError, OperationalError, close_old_connections, connections
from django_tasks.backends.base import BaseTaskBackend
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction, is_locked_database_exception

from annotation.lib import job_runs
from annotation.lib.dblocks import close_broken_connections, database_fault, is_lock_error
from annotation.lib.task_wakeup import Wakeup

logger = logging.getLogger(__name__)

#: Pause after a lock error escaped a turn of the loop, before the next turn.
LOCKED_PAUSE_SECONDS = 1.0


class LockTolerantWorker(Worker):
    """A Worker whose loop and outcome saves outlast lock contention, and that a queued task wakes."""

    def run(self) -> None:
        # Registered under an id of its own (the operator's --worker-id plus a random suffix): a
        # restarted worker with the same --worker-id must not pass for the dead one.
        self.worker_id = job_runs.new_worker_id(self.worker_id)
        logger.info("Starting worker worker_id=%s queues=%s", self.worker_id, ",".join(self.queue_names))
        if self.startup_delay and self.interval:
            time.sleep(random.random())
        registration = job_runs.WorkerRegistration(self.worker_id)
        self._recovered_at = 0.0
        self._recover()
        wakeup = Wakeup()
        try:
            while self.running:
                try:
                    self._work(wakeup)
                    return  # the loop ended on its own (batch done, max tasks, or shut down)
                except Exception as exc:
                    fault = database_fault(exc)
                    if fault is None:
                        raise
                    # A lock held too long, or the database restarting (a lost connection): the
                    # worker waits for it instead of exiting with its jobs left to recovery.
                    logger.warning("worker %s: %s (%s); going on shortly", self.worker_id, fault, exc)
                    close_broken_connections()
                    close_old_connections()
                    job_runs.sleep(LOCKED_PAUSE_SECONDS)
        finally:
            wakeup.close()
            registration.close()

    def _recover(self) -> None:
        """Re-queue what gone workers held (job_runs.recover_lost_work); at most every RECOVERY_CHECK_SECONDS."""
        if time.monotonic() - self._recovered_at < job_runs.RECOVERY_CHECK_SECONDS:
            return
        self._recovered_at = time.monotonic()
        try:
            handled = job_runs.recover_lost_work()
        except Exception as exc:  # a busy or briefly absent database: the next idle turn tries again
            if not is_lock_error(exc) and not isinstance(exc, DatabaseError):
                raise
            logger.warning("worker %s: recovery of lost jobs postponed (%s)", self.worker_id, exc)
            close_old_connections()
            return
        if handled:
            logger.warning("worker %s: re-queued or failed %d job(s) of gone workers", self.worker_id, len(handled))

    def _work(self, wakeup: Wakeup) -> None:
        """django-tasks-db 0.13's `Worker.run` loop, waiting on `wakeup` where it sleeps the interval.

        Why a copy: the stock loop's sleep has no hook, and a task queued during it waited for
        the sleep's end (task_wakeup). Claiming and running a task are the stock worker's own.
        """
        while self.running:
            close_old_connections()
            tasks = DBTaskResult.objects.ready().filter(backend_name=self.backend_name)
            if not self.process_all_queues:
                tasks = tasks.filter(queue_name__in=self.queue_names)
            if self.excluded_queue_names:
                tasks = tasks.exclude(queue_name__in=self.excluded_queue_names)
            with exclusive_transaction(tasks.db):
                try:
                    task_result = tasks.get_locked()
                    retrieved = True
                    if task_result is not None:
                        task_result.claim(self.worker_id)  # so no other worker runs it
                except OperationalError as exc:
                    if not is_locked_database_exception(exc):
                        raise
                    task_result, retrieved = None, False
            if task_result is not None:
                self.run_task(task_result)
            if self.batch and retrieved and task_result is None:
                logger.info("No more tasks to run for worker_id=%s - exiting gracefully.", self.worker_id)
                return
            if self.max_tasks is not None and self._run_tasks >= self.max_tasks:
                logger.info("Run maximum tasks (%d) on worker=%s - exiting gracefully.", self.max_tasks, self.worker_id)
                return
            close_old_connections()
            if self.running and task_result is None:
                self._recover()
                wakeup.wait(min(self.interval, job_runs.RECOVERY_CHECK_SECONDS))

    def run_task(self, db_task_result: DBTaskResult) -> None:
        set_successful, set_failed = db_task_result.set_successful, db_task_result.set_failed

        def save_success(value: Any) -> None:
            job_runs.retry_on_db_fault(
                partial(set_successful, value), what=f"recording task {db_task_result.id} as done"
            )

        def save_failure(exc: BaseException) -> None:
            job_runs.retry_on_db_fault(partial(set_failed, exc), what=f"recording task {db_task_result.id} as failed")

        db_task_result.set_successful = save_success
        db_task_result.set_failed = save_failure
        super().run_task(db_task_result)


RQ_BACKEND = "django_tasks_rq.RQBackend"
#: The job class that runs a django-tasks Task (a plain rq Job would call the Task object itself).
RQ_JOB_CLASS = "django_tasks_rq.Job"


def is_rq(backend: BaseTaskBackend) -> bool:
    """Whether the backend puts its tasks on Redis through RQ (django-tasks-rq)."""
    return f"{type(backend).__module__.split('.')[0]}.{type(backend).__name__}" == RQ_BACKEND


def run_rq_worker(
    backend: BaseTaskBackend, *, queue_names: list[str], burst: bool, max_jobs: int | None, name: str, verbosity: int
) -> None:
    """Work the backend's RQ queues (all of them for "*"): each task in a forked work horse, as `rqworker` does.

    Why not tell operators to run django-rq's `rqworker`: it needs the job class
    spelled out (`--job-class django_tasks_rq.Job`, else every task fails), and one
    documented command (`manage.py worker`, what `make run`/`make serve` start) is
    simpler. The worker registers itself under its RQ name; a worker killed mid-task
    is seen gone by the others (dead pid here, silent row elsewhere), which move its
    RQ job to the failed registry and queue the work again (job_runs.recover_lost_work,
    from RQ's own loop: RegisteredRQWorker); each job's claim (or a run's generation)
    lets only one worker do it.
    """
    import django_rq
    from django_rq.utils import reset_db_connections
    from rq.logutils import setup_loghandlers

    queues = sorted(backend.queues) if "*" in queue_names else queue_names
    level = "WARNING" if verbosity == 0 else "DEBUG" if verbosity >= 2 else "INFO"
    setup_loghandlers(level)
    without_connection_pool()
    for module in job_runs.PRELOADS:  # once here, inherited by every work horse (registered by the features)
        importlib.import_module(module)
    while True:
        worker_id = job_runs.new_worker_id(name)
        registration = job_runs.WorkerRegistration(worker_id, beat_thread=False)
        try:
            worker: Any = django_rq.get_worker(
                *queues, job_class=RQ_JOB_CLASS, name=worker_id, worker_class=registered_rq_worker_class(registration)
            )
            reset_db_connections()  # each task runs in a fork: no connection of this process may be shared with it
            try:
                worker.work(burst=burst, max_jobs=max_jobs, with_scheduler=True, logging_level=level)
            except REDIS_FAULTS as exc:  # from its teardown, after its loop quit on Redis going away
                logger.warning("worker %s: Redis is away (%s); waiting for it", worker_id, exc)
            else:
                # RQ's loop quits on any error of a Redis call outside its dequeue; it ended on its own
                # only in burst mode, after max_jobs, or on a stop signal.
                if burst or max_jobs is not None or worker._stop_requested:
                    return
                logger.warning("worker %s: RQ's loop quit on an error; starting it again", worker_id)
            # That run is over as if its process had died (what a supervisor's restart gave before):
            # its work horse is stopped and, once Redis answers, it leaves the registry, so recovery
            # (the next run's, or any worker's) queues its job again; the next run has a new name.
            stop_horse(worker)
            worker.wait_for_redis()
        finally:
            registration.close()


def stop_horse(worker: Any) -> None:
    """SIGKILL the work horse RQ's loop left running when it quit (none: nothing to do), and reap it."""
    if not worker.horse_pid:
        return
    with contextlib.suppress(OSError):
        worker.kill_horse()
    with contextlib.suppress(OSError):
        worker.wait_for_horse()


def registered_rq_worker_class(registration: job_runs.WorkerRegistration) -> type:
    """RQ's forking Worker, whose registry beat and lost-work recovery run in its own loop (no side thread).

    Why no thread: RQ forks a work horse for every task. A fork taken while a side thread is
    inside the database driver (SQLite's mutexes, a socket mid-query) leaves those locks held
    for ever in the horse, which then hangs on its first query until RQ's job timeout kills it
    (seen in CI: an import's horse stuck for ten minutes). So the parent process has one
    thread of ours, and no database connection open when it forks (closed after each turn).
    RQ's loop calls `heartbeat()` at least every second: idle, because the dequeue waits at
    most a second (`dequeue_timeout`); while a horse runs, because it checks on the horse every
    second (`job_monitoring_interval`).
    """
    from rq import Worker

    class RegisteredRQWorker(Worker):
        # While Redis is away, the dequeue tries again at most this far apart (RQ's default backs off
        # to 60 s, which would keep the queue idle for up to a minute after Redis is back).
        max_connection_wait_time = 2.0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("job_monitoring_interval", 1)
            super().__init__(*args, **kwargs)
            self._parent_pid = os.getpid()
            self._beaten_at = self._recovered_at = float("-inf")

        @property
        def dequeue_timeout(self) -> int:
            return 1

        def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
            super().heartbeat(timeout, pipeline)
            if os.getpid() == self._parent_pid:  # never in a work horse
                self._registry_turn()

        def wait_for_redis(self) -> None:
            """Wait until Redis answers, beating and recovering meanwhile, then mark this worker's last run
            dead in Redis (its teardown could not), so the next run may register under the same name."""
            while True:
                try:
                    self.connection.ping()
                    break
                except REDIS_FAULTS:
                    self._registry_turn()
                    time.sleep(REDIS_WAIT_SECONDS)
            with contextlib.suppress(redis.RedisError):
                self.register_death()

        def _registry_turn(self) -> None:
            now = time.monotonic()
            if now - self._beaten_at >= job_runs.WORKER_BEAT_SECONDS:
                self._beaten_at = now
                registration.beat()
            if now - self._recovered_at >= job_runs.RECOVERY_CHECK_SECONDS:
                self._recovered_at = now
                recover_quietly(self.name)

    return RegisteredRQWorker


#: What a Redis restart or outage raises (redis-py's lost or refused connection, a timed-out call).
REDIS_FAULTS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
#: Pause between two checks whether Redis is back.
REDIS_WAIT_SECONDS = 1.0


def recover_quietly(worker_id: str) -> None:
    """job_runs.recover_lost_work, logged; a database or Redis away for a moment only postpones it.
    No connection is left open after it (the RQ worker forks next)."""
    try:
        handled = job_runs.recover_lost_work()
        if handled:
            logger.warning("worker %s: re-queued or failed %d job(s) of gone workers", worker_id, len(handled))
    except Exception as exc:
        logger.warning("worker %s: recovery of lost jobs postponed (%s)", worker_id, exc)
    finally:
        connections.close_all()


def without_connection_pool() -> None:
    """Turn off psycopg's connection pool (DATABASE_POOL) in this process, before it opens a connection.

    Why: RQ runs each task in a fork of this process. A pool's idle connections would be
    inherited by the work horse while this process's heartbeat and recovery threads take
    them from the same pool: two processes on one socket ("COPY cannot be used with this
    method", "the connection is lost", a task failed for nothing). A worker holds a
    connection or two for long tasks, so it loses nothing by opening its own.
    """
    for alias in connections:
        wrapper = connections[alias]
        options = wrapper.settings_dict.get("OPTIONS") or {}
        if not options.get("pool"):
            continue
        wrapper.close()
        if hasattr(wrapper, "close_pool"):
            wrapper.close_pool()
        options["pool"] = False
        connections.settings[alias].setdefault("OPTIONS", {})["pool"] = False
