"""PostgreSQL's connection options follow the environment: prepared statements on unless turned off or overridden."""

from __future__ import annotations

from tests.support.settings_env import settings_under

UNSET = ("DATABASE_POOL", "DATABASE_PREPARED_STATEMENTS", "DATABASE_POOL_TIMEOUT_SECONDS")
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
    assert options["pool"] == {"timeout": 10.0}


def test_the_pool_checks_a_connection_before_handing_it_out_and_waits_for_a_restarting_server(tmp_path):
    """After a PostgreSQL restart the pool's connections are dead: checked before use (Django passes
    psycopg's check_connection under CONN_HEALTH_CHECKS), none is handed to a request; while the server
    is down a request waits DATABASE_POOL_TIMEOUT_SECONDS for one."""
    env = {"DATABASE_URL": POSTGRES, "DATABASE_POOL": "1", "DATABASE_POOL_TIMEOUT_SECONDS": "4.5"}
    database = settings_under(env, tmp_path / "var", unset=UNSET)["DATABASES"]["default"]
    assert database["CONN_HEALTH_CHECKS"] is True and database["OPTIONS"]["pool"] == {"timeout": 4.5}
    without_pool = settings_under({"DATABASE_URL": POSTGRES}, tmp_path / "var", unset=UNSET)["DATABASES"]["default"]
    assert without_pool["CONN_HEALTH_CHECKS"] is False  # a connection per request needs no check


def test_options_in_the_database_url_win(tmp_path):
    options = _options(tmp_path, DATABASE_URL=POSTGRES + "?prepare_threshold=20&server_side_binding=false")
    assert (options["server_side_binding"], options["prepare_threshold"]) == (False, 20)


def test_sqlite_gets_none_of_them(tmp_path):
    options = _options(tmp_path)
    assert options["transaction_mode"] == "IMMEDIATE"
    assert "server_side_binding" not in options and "prepare_threshold" not in options
