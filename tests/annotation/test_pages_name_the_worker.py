"""Pages and the deploy guide name `manage.py worker`, the command that runs tasks (issue 31, finding 6)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_page_names_db_worker():
    named = [str(path) for path in (ROOT / "templates").rglob("*.html") if "manage.py db_worker" in path.read_text()]
    assert named == []
    assert "manage.py worker" in (ROOT / "templates/metaeval/verifiers/verifiers.html").read_text()


def test_the_rq_section_says_to_migrate_with_the_rq_settings():
    deploy = (ROOT / "docs/deploy.md").read_text()
    rq = deploy[deploy.index("## Workers on Redis (RQ)") :]
    assert "python manage.py migrate" in rq and "django_rq" in rq
