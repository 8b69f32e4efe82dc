"""Claimlab settings, read from the environment (12-factor).

Everything a deployment changes comes from environment variables; nothing
secret lives in this file. `DEBUG` defaults to off so that a forgotten
variable fails safe.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

from config.malloc_arenas import limit_malloc_arenas

BASE_DIR = Path(__file__).resolve().parent.parent
# A local `.env` (written by `make run`: DEBUG=1) lets `manage.py` commands run
# on a laptop without exporting anything; real environment variables win.
load_dotenv(BASE_DIR / ".env", override=False)
VAR_DIR = Path(os.environ.get("CLAIMLAB_VAR_DIR", BASE_DIR / "var"))


def _env_number(name: str, default: float, *, integer: bool = True) -> Any:
    """A positive number from the environment; ImproperlyConfigured names the variable when it is not one."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a {'whole ' if integer else ''}number, got {raw!r}") from None
    if value < 0:
        raise ImproperlyConfigured(f"{name} must not be negative, got {raw!r}")
    return value


def env_bool(name: str, default: bool = False) -> bool:
    """Parse a boolean environment variable ("1", "true", "yes", "on")."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    """Parse a comma-separated environment variable into a list."""
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """SECRET_KEY from the environment; in debug, a per-checkout key under var/.

    Outside debug the app refuses to start without one: a default key would be
    a shared secret published with the source.
    """
    key = os.environ.get("SECRET_KEY", "").strip()
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Claimlab refuses to start without a secret key outside "
            "debug mode. Set SECRET_KEY in the environment (for example "
            "`export SECRET_KEY=$(python -c 'import secrets; print(secrets.token_urlsafe(50))')`), "
            "or set DEBUG=1 for local development."
        )
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key_file = VAR_DIR / "dev-secret-key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "csp",
    "axes",
    "accounts",
    "annotation",
    "metaeval",
]

MIDDLEWARE = [
    # First: /healthz and /readyz for load balancers, before HTTPS redirects and host checks (config/health.py).
    "config.health.HealthProbeMiddleware",
    # Second: a request id for the response header, every log line and the tasks queued (config/request_id.py).
    "config.request_id.RequestIdMiddleware",
    # Third: runs a repeat-safe request again whole after a passing database fault (annotation/middleware.py).
    "annotation.middleware.RepeatAfterDatabaseFaultMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "annotation.middleware.DatabaseBusyMiddleware",  # background jobs: lock contention -> 503, not 500
    # Last: turns a login that django-axes locked out into the lockout answer (accounts/lockout.py).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

# --- database ---------------------------------------------------------------
# Default: a SQLite file under var/ in WAL mode. IMMEDIATE transactions take the
# write lock up front, so two writers queue on the busy timeout instead of one
# failing with "database is locked" halfway through (docs/architecture.md, Mechanisms).
SQLITE_PATH = VAR_DIR / "claimlab.sqlite3"
DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(SQLITE_PATH)}}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": ("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"),
        }
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend with batches sized for server-side binding (config/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "config.postgresql"
    DATABASES["default"].setdefault("OPTIONS", {})
    if env_bool("DATABASE_POOL", False):
        # A pooled connection is checked (one round trip) before a request gets it (Django passes
        # psycopg's check_connection to the pool under CONN_HEALTH_CHECKS): after a restart or
        # failover the pool's old connections are dead, and a request handed one would answer
        # 503 although the server is back.
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
        DATABASES["default"]["OPTIONS"]["pool"] = {
            # While the server is down, a request waits this long for a connection (the pool
            # reconnects by itself), then answers 503; a restart takes a few seconds.
            "timeout": _env_number("DATABASE_POOL_TIMEOUT_SECONDS", 10.0, integer=False),
        }
    if env_bool("DATABASE_PREPARED_STATEMENTS", True):
        # Parameters bound by the server and statements prepared after 5 uses per connection:
        # PostgreSQL then plans the annotating requests' statements once instead of on every
        # label (issue 15: 10.3 -> 8.0 ms of server CPU per label in benchmarks/annotate_load.py).
        # Options given in DATABASE_URL win; set 0 behind a pooler in transaction mode
        # (PgBouncer), where a prepared statement may not be on the next transaction's connection.
        DATABASES["default"]["OPTIONS"].setdefault("server_side_binding", True)
        DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 5)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- auth -------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "annotation:my_studies"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- static files (all local: the machines are offline) ----------------------
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
if DEBUG:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns when it is missing
STORAGES: dict[str, dict[str, Any]] = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# Uploads larger than this go to a temporary file, so big imports stream from disk.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440
DATA_UPLOAD_MAX_MEMORY_SIZE = 10_485_760

# --- Annotation ---------------------------------------------------------------
# How long an annotator holds an item: after this, the next annotator who asks for work may take it over.
ANNOTATION_LEASE_SECONDS = int(os.environ.get("ANNOTATION_LEASE_SECONDS", 30 * 60))
# Uploads bigger than this are refused (the import commands take any size).
IMPORT_UPLOAD_MAX_BYTES = int(os.environ.get("IMPORT_UPLOAD_MAX_BYTES", 200 * 1024 * 1024))
# Uploads up to this size are imported during the request; bigger ones by a background task.
IMPORT_INLINE_MAX_BYTES = int(os.environ.get("IMPORT_INLINE_MAX_BYTES", 1024 * 1024))
# Exports of studies with more annotations than this are written by a background task, then downloaded.
EXPORT_INLINE_MAX_ROWS = int(os.environ.get("EXPORT_INLINE_MAX_ROWS", 50_000))

# --- security ---------------------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # the annotator UI's fetch() reads it
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS", 31_536_000))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    if env_bool("BEHIND_TLS_PROXY", True):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content Security Policy: only our own origin; no inline script anywhere.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# --- API --------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # Request bodies are JSON; the upload routes take multipart themselves (parser_classes). Why: a form body
    # cannot say an object, a null or an empty list, and DRF read such a field from a form as absent, so a
    # value the client sent was dropped without a word (issue 31). Another media type is a 415.
    # StrictJSONParser (annotation/lib/strict.py) also refuses a key given twice, NUL and deep nesting.
    "DEFAULT_PARSER_CLASSES": ["annotation.lib.strict.StrictJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "annotation.lib.strict.StrictPageNumberPagination",
    "PAGE_SIZE": 100,
    # `?format=csv|jsonl` selects an export format, not a DRF renderer.
    "URL_FORMAT_OVERRIDE": None,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Claimlab API",
    "DESCRIPTION": "Annotation and meta-evaluation studies of LLM factuality.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "StudyStatusEnum": "annotation.models.Study.Status",
        "JobStatusEnum": "annotation.models.JobStatus",
        "ExportFormatEnum": "annotation.models.ExportJob.Format",
        # the upload routes' `format` (imports, verifier predictions): its name before exports had their own
        "FormatEnum": ["jsonl", "csv"],
        "AssignmentStatusEnum": "annotation.models.Assignment.Status",
        "PreferenceChoiceEnum": "annotation.workbench.services.PREFERENCE_CHOICES",
        "EvidenceJudgementEnum": "annotation.vocab.EVIDENCE_JUDGEMENTS",
    },
}

# --- API errors and contract (issue 10 §5) -------------------------------------
# One JSON error shape for every API error ({"detail", "code", "fields"}), declared on every operation.
REST_FRAMEWORK["EXCEPTION_HANDLER"] = "annotation.lib.api_errors.exception_handler"
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums",
    "annotation.lib.api_errors.add_error_responses",
]

# --- background work ----------------------------------------------------------
TASKS = {
    "default": {
        "BACKEND": os.environ.get("TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default"],
    }
}

# --- Verifiers ---
# Read here, once per process; the verifier code reads them through django.conf.settings.


def _verifier_stale_seconds() -> float:
    """Seconds without a heartbeat after which a run counts as orphaned (a bad value falls back to 120)."""
    try:
        seconds = float(os.environ.get("CLAIMLAB_VERIFIER_STALE_SECONDS", 120.0))
    except ValueError:
        seconds = 120.0
    return max(seconds, 0.0)


def _verifier_chunk_size() -> int | None:
    """Items per chunk task when set to a positive whole number; else None (a few rounds of the concurrency)."""
    configured = os.environ.get("CLAIMLAB_VERIFIER_CHUNK_SIZE", "").strip()
    return int(configured) if configured.isdigit() and int(configured) > 0 else None


# A run whose heartbeat is this old is resumed (by resume_stale_runs, or by starting its verifier again).
VERIFIER_STALE_SECONDS = _verifier_stale_seconds()
# Items per chunk task; None: 16 rounds of the verifier's concurrency, from 16 to 2,000 items.
VERIFIER_CHUNK_SIZE = _verifier_chunk_size()
# Prediction files uploaded on the verifiers page or the API (bigger: manage.py import_predictions).
PREDICTION_UPLOAD_MAX_BYTES = int(os.environ.get("PREDICTION_UPLOAD_MAX_BYTES", 10 * 1024 * 1024))

# --- Background jobs: heartbeat, recovery, lock contention ---
# Read here, once per process; annotation.lib.job_runs and annotation.middleware read them.


def _job_number(name: str, default: float, minimum: float) -> float:
    """A non-negative number from the environment; a bad value falls back to the default."""
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        value = default
    return max(value, minimum)


# An import or export job whose heartbeat is this old has lost its worker (resume_stale_jobs re-queues it).
JOB_STALE_SECONDS = _job_number("CLAIMLAB_JOB_STALE_SECONDS", 120.0, 1.0)
# Times a job may be started by a worker before recovery fails it instead of queueing it again.
JOB_MAX_ATTEMPTS = int(_job_number("CLAIMLAB_JOB_MAX_ATTEMPTS", 3, 1))
# Retries of a job's transaction that failed on "database is locked", with doubling backoff from this delay.
JOB_LOCK_RETRIES = int(_job_number("CLAIMLAB_JOB_LOCK_RETRIES", 4, 0))
JOB_LOCK_BACKOFF_SECONDS = _job_number("CLAIMLAB_JOB_LOCK_BACKOFF_SECONDS", 5.0, 0.0)
# Retry-After (seconds) of the 503 a request gets when the database stayed locked past the busy timeout.
DB_BUSY_RETRY_AFTER_SECONDS = int(_job_number("CLAIMLAB_DB_BUSY_RETRY_AFTER_SECONDS", 5, 1))
# An annotator's claim or answer (and the annotate page) that met a passing database fault (a lock held
# past the busy timeout, a connection lost to a restart) is run again whole while it is younger than
# this; then it answers the 503 (annotation/middleware.py). Keep it plus SQLite's 20 s busy timeout
# under the web server's request timeout (make serve: 60 s). 0 turns the retry off.
DB_FAULT_RETRY_SECONDS = _job_number("CLAIMLAB_DB_FAULT_RETRY_SECONDS", 25.0, 0.0)

# --- Logins and API tokens ---------------------------------------------------------
# django-axes counts failed logins (login page, admin, POST /api/auth/token/) and refuses a
# locked-out client before its password is hashed. See accounts/lockout.py and docs/security.md.
AUTHENTICATION_BACKENDS = [
    "accounts.lockout.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "accounts.lockout.LoginThrottleHandler"
# Failures are counted per (username, address) and per address; the limits below in that order.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
# Failed logins of one username from one address before that pair is locked out.
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", 5))
# Failed logins from one address, whatever the usernames, before the address is locked out.
LOGIN_IP_FAILURE_LIMIT = int(os.environ.get("LOGIN_IP_FAILURE_LIMIT", 50))
# Minutes a lockout lasts (failures older than this are forgotten).
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("LOGIN_COOLOFF_MINUTES", 15)))
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.lockout_response"
AXES_CLIENT_IP_CALLABLE = "accounts.lockout.client_ip"
# Proxies in front of the app that append the client address to X-Forwarded-For; 0: use REMOTE_ADDR
# (a client could forge X-Forwarded-For otherwise). Behind one nginx or load balancer: 1.
LOGIN_TRUSTED_PROXY_COUNT = int(os.environ.get("LOGIN_TRUSTED_PROXY_COUNT", 0))
# Successful logins are Django's business; axes keeps only the failures.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False
# New API tokens expire after this many days unless the request says otherwise; 0: never.
API_TOKEN_DEFAULT_DAYS: int | None = int(os.environ.get("API_TOKEN_DEFAULT_DAYS", 0)) or None
# The longest expiry a user may ask for, in days.
API_TOKEN_MAX_DAYS = int(os.environ.get("API_TOKEN_MAX_DAYS", 3650))
# A token's "last used" time is written at most this often (a write per request would slow the API).
API_TOKEN_LAST_USED_SECONDS = int(os.environ.get("API_TOKEN_LAST_USED_SECONDS", 300))

# --- verifier endpoints (issue 10 §1: verifiers cannot be turned against the server) ---
# A server key is only ever sent to its own operator-defined endpoint; researchers pick an endpoint by name.
ENDPOINT_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
KEY_ENV_NAME = r"^[A-Z_][A-Z0-9_]{0,99}$"


def _endpoint_problem(name: Any, spec: Any) -> str | None:
    """Why one CLAIMLAB_ENDPOINTS entry is unusable, or None."""
    import re
    from urllib.parse import urlsplit

    if not isinstance(name, str) or not re.fullmatch(ENDPOINT_NAME, name):
        return f"the name {name!r} must be lower-case letters, digits, - or _ (at most 64)"
    if not isinstance(spec, dict):
        return f"{name!r} must be an object with base_url, key_env, models, max_concurrency"
    unknown = set(spec) - {"base_url", "key_env", "models", "max_concurrency"}
    if unknown:
        return f"{name!r} has unknown field(s) {', '.join(sorted(unknown))}"
    url = spec.get("base_url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.username:
        return f"{name!r}: base_url must be an http(s) URL with a host and no user name, got {url!r}"
    key_env = spec.get("key_env", "")
    if not isinstance(key_env, str) or (key_env and not re.fullmatch(KEY_ENV_NAME, key_env)):
        return f"{name!r}: key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY), or empty"
    models = spec.get("models", [])
    if not isinstance(models, list) or not all(isinstance(model, str) and model for model in models):
        return f"{name!r}: models must be a list of model names (empty: any model)"
    cap = spec.get("max_concurrency")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        return f"{name!r}: max_concurrency must be a whole number of at least 1"
    return None


def _verifier_endpoints() -> dict[str, dict[str, Any]]:
    """CLAIMLAB_ENDPOINTS as {name: {base_url, key_env, models, max_concurrency}}; ImproperlyConfigured when bad."""
    import json

    raw = os.environ.get("CLAIMLAB_ENDPOINTS", "").strip()
    if not raw:  # a laptop's Ollama works out of the box; production names its endpoints
        return {"local": {"base_url": "http://127.0.0.1:11434/v1", "key_env": ""}} if DEBUG else {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(f"CLAIMLAB_ENDPOINTS is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(parsed, dict):
        raise ImproperlyConfigured('CLAIMLAB_ENDPOINTS must be a JSON object: {"openai": {"base_url": ...}}')
    endpoints = {}
    for name, spec in parsed.items():
        problem = _endpoint_problem(name, spec)
        if problem:
            raise ImproperlyConfigured(f"CLAIMLAB_ENDPOINTS: {problem}")
        endpoints[name] = {
            "base_url": spec["base_url"].rstrip("/"),
            "key_env": spec.get("key_env", ""),
            "models": list(spec.get("models", [])),
            "max_concurrency": spec.get("max_concurrency"),
        }
    return endpoints


# Named endpoints a verifier may use; DEBUG without CLAIMLAB_ENDPOINTS: "local" = Ollama at 127.0.0.1:11434.
VERIFIER_ENDPOINTS = _verifier_endpoints()
# Whether researchers may add their own endpoint (URL + their key, stored encrypted). Off by default.
VERIFIER_RESEARCHER_ENDPOINTS = env_bool("CLAIMLAB_RESEARCHER_ENDPOINTS", False)
# CIDRs and host names a researcher endpoint may reach although not public (DEBUG: loopback, for local servers).
VERIFIER_ADDRESS_ALLOW = env_list("CLAIMLAB_ENDPOINT_ALLOW", "127.0.0.0/8,::1" if DEBUG else "")
# What a researcher may ask of an endpoint, at most.
VERIFIER_MAX_CONCURRENCY = _env_number("CLAIMLAB_VERIFIER_MAX_CONCURRENCY", 64)
VERIFIER_MAX_TIMEOUT = _env_number("CLAIMLAB_VERIFIER_MAX_TIMEOUT", 600.0, integer=False)
VERIFIER_MAX_RETRIES = _env_number("CLAIMLAB_VERIFIER_MAX_RETRIES", 5)
VERIFIER_MAX_TOKENS = _env_number("CLAIMLAB_VERIFIER_MAX_TOKENS", 16384)


# --- Prolific (issue 34): approving, rejecting and bonusing a study's submissions from Claimlab ---
def _prolific_api_url() -> str:
    """PROLIFIC_API_URL: the one host the Prolific client talks to (the operator's choice, never a researcher's)."""
    from urllib.parse import urlsplit

    raw = os.environ.get("PROLIFIC_API_URL", "").strip() or "https://api.prolific.com"
    parts = urlsplit(raw)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username
        or parts.password
        or parts.query
        or parts.fragment
    ):
        raise ImproperlyConfigured(
            f"PROLIFIC_API_URL must be an http(s) URL with a host and nothing after its path, got {raw!r}"
        )
    return raw.rstrip("/")


# Requests go to this URL + /api/v1/...; tests point it at a local fake (tests/support/fake_prolific.py).
PROLIFIC_API_URL = _prolific_api_url()
# Seconds the Prolific client waits to connect and for each answer before it gives up with an error.
PROLIFIC_API_TIMEOUT_SECONDS = _env_number("PROLIFIC_API_TIMEOUT_SECONDS", 15.0, integer=False)

# --- logging: one JSON object per line outside debug ---------------------------
LOG_LEVEL = os.environ.get("LOG_LEVEL", "INFO")
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
        "console": {"format": "%(asctime)s %(levelname)-7s %(name)s: %(message)s"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": os.environ.get("LOG_FORMAT", "console" if DEBUG else "json"),
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},  # one line per verifier request otherwise
        "claimlab": {"level": LOG_LEVEL, "propagate": True},
    },
}

# --- study members: invite links (annotation/members/invites.py) ---------------
# Days an invite link works when its creator does not say; and the longest they may ask for.
INVITE_DEFAULT_DAYS = max(1, _env_number("INVITE_DEFAULT_DAYS", 7))
INVITE_MAX_DAYS = max(1, _env_number("INVITE_MAX_DAYS", 90))
# The most people one invite link may admit.
INVITE_MAX_USES = max(1, _env_number("INVITE_MAX_USES", 1000))
# Accounts one client address may create through invite links per window (the address as for logins).
INVITE_SIGNUP_LIMIT = max(1, _env_number("INVITE_SIGNUP_LIMIT", 10))
INVITE_SIGNUP_WINDOW_MINUTES = max(1, _env_number("INVITE_SIGNUP_WINDOW_MINUTES", 60))

# --- studies made in the browser and the API (issue 11) ----------------------
# Who may create studies: staff, users with the permission `annotation.add_study` (directly or
# through a group, e.g. "researchers"), and researchers of any study. 1: every logged-in user.
ANYONE_CAN_CREATE_STUDIES = env_bool("CLAIMLAB_ANYONE_CAN_CREATE_STUDIES", False)

# --- import adapters (annotation/adapters, docs/importing.md) --------------------
# A pipeline's own file (--from) uploaded on a page or through the API is converted and
# imported during the request, so it is bounded here; bigger files go through the
# import_items / import_annotations / import_predictions commands with --from.
IMPORT_FROM_UPLOAD_MAX_BYTES = _env_number("IMPORT_FROM_UPLOAD_MAX_BYTES", 20 * 1024 * 1024)

# --- several web hosts (issue 16 §1): shared file storage, shared cache, request ids ------------
# Uploads waiting for a background import and finished exports go through this storage
# (annotation/lib/storage.py). Default: a folder under CLAIMLAB_VAR_DIR, one host's own disk. With
# CLAIMLAB_S3_BUCKET set: an S3-compatible bucket (AWS, MinIO, Ceph...), so any web host and any
# worker reach every file; exports are then downloaded from a short-lived presigned URL.
S3_BUCKET = os.environ.get("CLAIMLAB_S3_BUCKET", "").strip()
# Seconds a presigned download URL works.
CLAIMLAB_S3_URL_EXPIRY_SECONDS = max(1, _env_number("CLAIMLAB_S3_URL_EXPIRY_SECONDS", 300))
if S3_BUCKET:
    from botocore.config import Config as S3ClientConfig

    STORAGES["claimlab_files"] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": S3_BUCKET,
            # Unset values fall back to boto3's own lookup (AWS_* variables, instance roles).
            "endpoint_url": os.environ.get("CLAIMLAB_S3_ENDPOINT_URL", "").strip() or None,
            "region_name": os.environ.get("CLAIMLAB_S3_REGION", "").strip() or None,
            "access_key": os.environ.get("CLAIMLAB_S3_ACCESS_KEY_ID", "").strip() or None,
            "secret_key": os.environ.get("CLAIMLAB_S3_SECRET_ACCESS_KEY", "").strip() or None,
            "client_config": S3ClientConfig(
                # "path" for servers without virtual-host buckets (MinIO on one address); empty: boto3 decides.
                s3={"addressing_style": os.environ.get("CLAIMLAB_S3_ADDRESSING_STYLE", "").strip() or None},
                signature_version="s3v4",
                # A bucket that does not answer fails a request (and /readyz) in seconds, not minutes.
                connect_timeout=_env_number("CLAIMLAB_S3_CONNECT_TIMEOUT_SECONDS", 5),
                read_timeout=60,
                retries={"mode": "standard", "max_attempts": 3},
            ),
            "location": os.environ.get("CLAIMLAB_S3_PREFIX", "").strip().strip("/"),
            "querystring_auth": True,
            "querystring_expire": CLAIMLAB_S3_URL_EXPIRY_SECONDS,
            "default_acl": None,  # private objects; only presigned URLs read them
            # Names carry a random part already; no existence check (one request fewer per save).
            "file_overwrite": True,
        },
    }
else:
    STORAGES["claimlab_files"] = {"BACKEND": "annotation.lib.storage.VarDirStorage"}
# Seconds a background job waits out an object store that does not answer (restarted, failing
# over) before it fails with the store's error (annotation/lib/storage.py, while_storage_away).
STORAGE_OUTAGE_SECONDS = max(0.0, _env_number("CLAIMLAB_STORAGE_OUTAGE_SECONDS", 120.0, integer=False))

# A cache shared by every host (Redis) when REDIS_URL or CACHE_URL is set; else each process's own memory.
CACHE_URL = (os.environ.get("CACHE_URL", "") or os.environ.get("REDIS_URL", "")).strip()
if CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "claimlab"),
        }
    }

# Every log record made during a request or a task carries its request_id (config/request_id.py).
LOGGING["filters"] = {"request_id": {"()": "config.request_id.RequestIdFilter"}}
LOGGING["handlers"]["console"]["filters"] = ["request_id"]

# --- task queue on Redis (RQ): the scale-out choice beside the database backend -----------
# TASKS_BACKEND=django_tasks_rq.RQBackend puts the tasks on Redis (REDIS_URL); `manage.py worker`
# then runs an RQ worker (docs/deploy.md, "Workers on Redis (RQ)"). REDIS_URL also turns on the
# verifier endpoints' shared concurrency limiter (metaeval/verifiers/limiter.py) on either backend.
REDIS_URL = os.environ.get("REDIS_URL", "").strip()
TASKS_ON_RQ = TASKS["default"]["BACKEND"] == "django_tasks_rq.RQBackend"
if TASKS_ON_RQ:
    if not REDIS_URL:
        raise ImproperlyConfigured(
            "TASKS_BACKEND=django_tasks_rq.RQBackend needs REDIS_URL (e.g. redis://127.0.0.1:6379/0)."
        )
    INSTALLED_APPS.append("django_rq")
    RQ_QUEUES = {
        name: {
            "URL": REDIS_URL,
            # RQ kills a task running longer than this (its default, 180 s, is too short for a big import).
            "DEFAULT_TIMEOUT": max(1, _env_number("RQ_JOB_TIMEOUT", 3600)),
        }
        for name in TASKS["default"]["QUEUES"]
    }
# Seconds a verifier call's slot in the shared limiter is leased for (renewed every third of it while
# the call runs): a killed worker's slots come back after at most this long.
VERIFIER_SLOT_LEASE_SECONDS = max(1.0, _env_number("CLAIMLAB_VERIFIER_SLOT_LEASE_SECONDS", 30.0, integer=False))

# --- Report cache (issue 15 §3; metaeval/reporting/cache.py) ---
# A page view that finds only an older report queues one background rebuild; if that rebuild has not
# stored its report after this many seconds (its worker may have died), the next view queues it again.
REPORT_REFRESH_RETRY_SECONDS = _job_number("CLAIMLAB_REPORT_REFRESH_RETRY_SECONDS", 600.0, 0.0)
# A study's very first report is built in the page's request up to this many labels (about a second);
# a bigger study's is built in the background while the page says so, so no request waits on it
# (or is cut off by the web server's timeout).
REPORT_INLINE_MAX_LABELS = int(_job_number("CLAIMLAB_REPORT_INLINE_MAX_LABELS", 50_000, 0))
# glibc malloc arenas per process (config/malloc_arenas.py): one, so that the memory a big report's reading
# and computing threads free is used again by the rest of its build; 0 leaves glibc's default.
MALLOC_ARENAS = int(_env_number("CLAIMLAB_MALLOC_ARENAS", 1))
limit_malloc_arenas(MALLOC_ARENAS)
# The niceness of background work (annotation/lib/background_priority.py): the worker and the import commands yield
# the CPU to the web processes annotators wait on; 0 leaves them as started (at most 19).
BACKGROUND_NICE = int(min(19, _job_number("CLAIMLAB_BACKGROUND_NICE", 10, 0)))
