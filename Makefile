# Claimlab: `make run` starts the app with the demo; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE ?= config.settings

.PHONY: run serve test lint format docs lock bench demo-passwords install install-dev check clean

$(VENV)/bin/python:
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall only when the pins change (stamp files remember what was installed).
# The requirements files are hashed locks (see `make lock`), so pip checks every download.
$(VENV)/.runtime-installed: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet --require-hashes -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet --require-hashes -r requirements-dev.txt
	touch $(VENV)/.runtime-installed $@

install: $(VENV)/.runtime-installed
install-dev: $(VENV)/.dev-installed

.env:
	@printf '# Local development settings (not committed). Real environment variables win.\nDEBUG=1\n' > .env

run: install .env
	@mkdir -p var
	$(PY) manage.py migrate --no-input
	$(PY) manage.py load_demo
	$(PY) manage.py load_demo_verifiers
	$(PY) manage.py resume_stale_runs
	$(PY) manage.py resume_stale_jobs
	@echo ""
	@echo "Claimlab is starting on http://$(HOST):$(PORT)/ (log in with a demo account above; Ctrl-C stops it)."
	@# Ctrl-C reaches both processes (same process group); the worker is stopped by
	@# its pid when the server ends, so make exits cleanly instead of re-signalling itself.
	@$(PY) manage.py worker --no-reload & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker 2>/dev/null; exit 0' INT TERM; \
	$(PY) manage.py runserver --noreload $(HOST):$(PORT); \
	kill $$worker 2>/dev/null; wait $$worker 2>/dev/null; true

# The production stack on one host (docs/deploy.md): gunicorn (WEB_CONCURRENCY workers, default
# 2 x cores + 1) with whitenoise for static files, and one background worker. Settings come from
# the environment (README, Configuration): SECRET_KEY and ALLOWED_HOSTS at least. It refuses to
# start on a database with unapplied migrations (run `manage.py migrate` once, from one host).
serve: install
	@test -n "$$SECRET_KEY" || { echo "make serve runs with DEBUG off: set SECRET_KEY (and ALLOWED_HOSTS, DATABASE_URL) first"; exit 2; }
	@DEBUG=0 $(PY) manage.py migrate --check >/dev/null || { echo "the database has unapplied migrations: run '$(PY) manage.py migrate' first"; exit 2; }
	@DEBUG=0 $(PY) manage.py collectstatic --no-input -v 0
	@DEBUG=0 $(PY) manage.py resume_stale_runs >/dev/null
	@DEBUG=0 $(PY) manage.py resume_stale_jobs >/dev/null
	@echo "Claimlab (production settings) on http://$(HOST):$(PORT)/; /healthz and /readyz for the load balancer."
	@DEBUG=0 $(PY) manage.py worker --no-reload & worker=$$!; \
	trap 'kill $$worker 2>/dev/null; wait $$worker 2>/dev/null; exit 0' INT TERM; \
	DEBUG=0 $(VENV)/bin/gunicorn config.wsgi --bind $(HOST):$(PORT) \
	  --workers $${WEB_CONCURRENCY:-$$((2 * $$(nproc) + 1))} --timeout 60 --graceful-timeout 30 \
	  --access-logfile - ; \
	kill $$worker 2>/dev/null; wait $$worker 2>/dev/null; true

demo-passwords: install .env
	$(PY) manage.py load_demo --reset-passwords

# Every core by default (pytest-xdist, one database per worker); PYTEST_ARGS adds or overrides,
# e.g. `make test PYTEST_ARGS="-n0 tests/stats"` for one process on one folder.
test: install-dev
	DJANGO_SETTINGS_MODULE=config.settings_test $(PY) -m pytest -n auto --dist loadfile $(PYTEST_ARGS)

# ruff (lint and format check), mypy, and import-linter (the import direction in .importlinter:
# features one way, metaeval and accounts on annotation); `make format` applies ruff's fixes and formatting.
lint: install-dev
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

format: install-dev
	$(PY) -m ruff check --fix .
	$(PY) -m ruff format .

# The user guide (docs/, mkdocs.yml) as a site in site/; --strict fails on a broken link or a
# page left out of the navigation.
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# Regenerate the hashed pins from requirements.in / requirements-dev.in (keeps current
# versions; `make lock LOCK_ARGS=--upgrade` moves to the newest ones).
LOCK := $(PY) -m piptools compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links $(LOCK_ARGS)
lock: install-dev
	$(LOCK) --output-file requirements.txt requirements.in
	$(LOCK) --output-file requirements-dev.txt requirements-dev.in

bench: install-dev
	@set -e; for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script; done

check: install .env
	$(PY) manage.py check

clean:
	rm -rf var/claimlab.sqlite3* var/uploads
