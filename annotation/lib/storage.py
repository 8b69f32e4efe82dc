"""Where uploads waiting for a background import and finished export files live (issue 16 §1).

Every such file goes through one named Django storage, ``STORAGES["claimlab_files"]``
(config/settings.py): a folder under ``settings.VAR_DIR`` by default, so `make run` keeps its
files where they always were, or an S3-compatible bucket (django-storages) when
``CLAIMLAB_S3_BUCKET`` is set, so that an upload received by one web host is read by a worker
on another and an export written by any worker is downloaded from any web host.

Files are named by the storage (``uploads/<job>-<uuid>.<fmt>``, ``exports/<job>-<uuid>-...``);
the job rows keep that name in ``file_path``. Work that needs a real file on disk (an importer
that seeks, an export being written) uses a scratch folder local to the process
(``scratch_dir``), and only whole files are handed to the storage.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as StoreConnectionError
from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.core.signals import setting_changed
from django.http import FileResponse, HttpResponseRedirect
from django.http.response import HttpResponseBase
from django.utils.functional import cached_property
from django.utils.http import content_disposition_header

logger = logging.getLogger(__name__)
T = TypeVar("T")

STORAGE_ALIAS = "claimlab_files"
UPLOADS = "uploads"
EXPORTS = "exports"


class VarDirStorage(FileSystemStorage):
    """FileSystemStorage under settings.VAR_DIR (rather than MEDIA_ROOT), followed when it changes.

    The tests that point VAR_DIR at a temporary folder get their files there without
    rebuilding the storage, as Django's own FileSystemStorage follows MEDIA_ROOT.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        setting_changed.connect(self._follow_var_dir)

    @cached_property
    def base_location(self) -> str:
        return str(settings.VAR_DIR)

    def _follow_var_dir(self, *, setting: str, **kwargs: Any) -> None:
        if setting == "VAR_DIR":
            self.__dict__.pop("base_location", None)
            self.__dict__.pop("location", None)


def files() -> Storage:
    """The storage of uploads and exports (STORAGES["claimlab_files"])."""
    return storages[STORAGE_ALIAS]


def scratch_dir(kind: str) -> Path:
    """A folder on this host's own disk for work in progress (`VAR_DIR/scratch/<kind>`), made on first use.

    Never shared between hosts: only the process that writes a scratch file reads it, and what
    it leaves after a crash is removed by the next recovery on the same host (job_recovery).
    """
    path = Path(settings.VAR_DIR) / "scratch" / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


class _FinishedFile(File):
    """A whole file on local disk handed to the storage: FileSystemStorage moves it into place
    (one rename on the same disk, so the stored name never shows a half-written file); other
    storages upload it (an S3 object appears only once its upload completes)."""

    def temporary_file_path(self) -> str:
        return str(self.name)


#: Patched by tests, so that waiting out an outage costs no real time.
sleep: Callable[[float], None] = time.sleep


def is_storage_outage(exc: BaseException) -> bool:
    """Whether `exc` is an object store not answering for now (refused, reset, timed out, or its own
    5xx such as 503 SlowDown), as opposed to a refusal that trying again would not change."""
    if isinstance(exc, (StoreConnectionError, HTTPClientError)):
        return True
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0) >= 500
    return False


def while_storage_away(action: Callable[[], T], *, what: str) -> T:
    """`action()`, tried again while the object store is away, for up to settings.STORAGE_OUTAGE_SECONDS.

    Why: a job that fails because the bucket restarted for half a minute (an upgrade, a
    failover) makes the researcher start it again for nothing. Only whole steps are retried
    (an upload appears in a bucket only once complete); past the limit, the store's own error
    is raised and the job says it.
    """
    deadline = time.monotonic() + settings.STORAGE_OUTAGE_SECONDS
    pause = 0.5
    while True:
        try:
            return action()
        except Exception as exc:
            if not is_storage_outage(exc) or time.monotonic() >= deadline:
                raise
            logger.warning("%s: the file store does not answer (%s); trying again in %.1f s", what, exc, pause)
            sleep(pause)
            pause = min(pause * 2, 8.0)


def store_finished_file(local: Path, name: str) -> str:
    """Hand the finished local file `local` to the storage as `name`; the stored name (`local` is gone after).
    An object store away for a while is waited out (`while_storage_away`)."""

    def save() -> str:
        with local.open("rb") as handle:
            return files().save(name, _FinishedFile(handle, name=str(local)))

    stored = while_storage_away(save, what=f"storing {name}")
    local.unlink(missing_ok=True)  # moved by FileSystemStorage; uploaded (and left here) by the others
    return stored


@contextmanager
def local_copy(name: str, *, kind: str) -> Iterator[IO[bytes]]:
    """A seekable binary file of stored `name` for an importer: the stored file itself when the storage
    is a local folder, else a download into this host's scratch folder, removed on leaving."""
    storage = files()
    if isinstance(storage, FileSystemStorage):
        with open(storage.path(name), "rb") as stored:
            yield stored
        return
    with tempfile.NamedTemporaryFile(dir=scratch_dir(kind), prefix=Path(name).stem + "-", suffix=".download") as copy:

        def download() -> None:
            copy.seek(0)
            copy.truncate()
            with storage.open(name, "rb") as stored:
                shutil.copyfileobj(stored, copy, length=1024 * 1024)

        while_storage_away(download, what=f"reading {name}")
        copy.flush()
        copy.seek(0)
        yield copy


def stored_names(folder: str) -> list[str]:
    """The names of the files stored in `folder` (none when nothing was ever stored there)."""
    try:
        _folders, names = files().listdir(folder)
    except FileNotFoundError:  # a local folder not made yet; a bucket simply lists nothing
        return []
    return [f"{folder}/{name}" for name in names]


def delete_quietly(name: str, *, wait_for_store: bool = False) -> None:
    """Remove stored `name` if it is there (a second delete, or one after a crash, is no error).

    An object store away: with `wait_for_store` (a job's own cleanup, outside any transaction) it
    is waited out (`while_storage_away`); without (recovery, which runs inside a transaction that
    holds row locks, or in a worker's loop that must keep beating) the file is left, with a warning.
    """
    if not name:
        return
    if wait_for_store:
        while_storage_away(lambda: files().delete(name), what=f"removing {name}")
        return
    try:
        files().delete(name)
    except Exception as exc:
        if not is_storage_outage(exc):
            raise
        logger.warning("%s was not removed: the file store does not answer (%s)", name, exc)


def download_response(name: str, *, filename: str, content_type: str) -> HttpResponseBase:
    """Stored `name` as a download: a redirect to a presigned URL when the storage has them (S3: the
    bytes never pass through the web worker), else the file streamed by this process.

    The caller has already checked that the user may have the file; the URL is short-lived
    (CLAIMLAB_S3_URL_EXPIRY_SECONDS) and makes the browser save it as `filename`.
    """
    storage = files()
    url = _presigned_url(storage, name, filename=filename, content_type=content_type)
    if url is None:
        return FileResponse(storage.open(name, "rb"), as_attachment=True, filename=filename, content_type=content_type)
    response = HttpResponseRedirect(url)
    response["Cache-Control"] = "no-store"  # a signed URL is for this user, now; no cache may keep it
    return response


def _presigned_url(storage: Storage, name: str, *, filename: str, content_type: str) -> str | None:
    """A short-lived GET URL of `name` that answers as a download of `filename`; None when the storage has none."""
    if isinstance(storage, FileSystemStorage):
        return None
    from storages.backends.s3 import S3Storage  # boto3 is loaded only by processes that use another storage

    if not isinstance(storage, S3Storage):
        return None
    return storage.url(
        name,
        parameters={
            "ResponseContentDisposition": content_disposition_header(as_attachment=True, filename=filename),
            "ResponseContentType": content_type,
        },
        expire=settings.CLAIMLAB_S3_URL_EXPIRY_SECONDS,
    )
