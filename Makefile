# Claimlab: `make run` starts the app with the demo; `make test` runs the whole suite.
SHELL := /bin/bash
PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
export DJANGO_SETTINGS_MODULE ?= config.settings

.PHONY: run test bench demo-passwords install install-dev check clean

$(VENV)/bin/python:
	$(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Reinstall only when the pins change (stamp files remember what was installed).
$(VENV)/.runtime-installed: requirements.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet -r requirements-dev.txt
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
	@echo ""
	@echo "Claimlab is starting on http://$(HOST):$(PORT)/ (log in with a demo account above; Ctrl-C stops it)."
	@trap 'kill 0' EXIT INT TERM; \
	$(PY) manage.py db_worker --no-reload & \
	$(PY) manage.py runserver --noreload $(HOST):$(PORT)

demo-passwords: install .env
	$(PY) manage.py load_demo --reset-passwords

test: install-dev
	DJANGO_SETTINGS_MODULE=config.settings_test $(PY) -m pytest $(PYTEST_ARGS)

bench: install-dev
	@set -e; for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script; done

check: install .env
	$(PY) manage.py check

clean:
	rm -rf var/claimlab.sqlite3* var/uploads
