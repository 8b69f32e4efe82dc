"""PostgreSQL's connection options follow the environment: prepared statements on unless turned off or overridden."""

from __future__ import annotations

from tests.support.settings_env import settings_under

UNSET = ("DATABASE_POOL", "DATABASE_PREPARED_STATEMENTS")
POSTGRES = "postgres://claimlab@db.internal:5432/claimlab"


def _options(tmp_path, **env: str) -> dict:
    return settings_under(env, tmp_path / "var", unset=UNSET)["DATABASES"]["default"].get("OPTIONS", {})


def test_postgresql_binds_on_the_server_and_prepares_by_default(tmp_path):
    options = _options(tmp_path, DATABASE_URL=POSTGRES)
    assert (options["server_side_binding"], options["prepare_threshold"]) == (True, 5)
    assert "pool" not in options


def test_an_operator_behind_pgbouncer_turns_them_off(tmp_path):
    options = _options(tmp_path, DATABASE_URL=POSTGRES, DATABASE_PREPARED_STATEMENTS="0", DATABASE_POOL="1")
    assert "server_side_binding" not in options and "prepare_threshold" not in options
    assert options["pool"] is True


def test_options_in_the_database_url_win(tmp_path):
    options = _options(tmp_path, DATABASE_URL=POSTGRES + "?prepare_threshold=20&server_side_binding=false")
    assert (options["server_side_binding"], options["prepare_threshold"]) == (False, 20)


def test_sqlite_gets_none_of_them(tmp_path):
    options = _options(tmp_path)
    assert options["transaction_mode"] == "IMMEDIATE"
    assert "server_side_binding" not in options and "prepare_threshold" not in options
