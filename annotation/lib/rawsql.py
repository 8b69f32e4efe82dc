"""Hand-written SQL for the few statements on the annotating hot path.

Why not the ORM there: profiling the API's next + submit turn showed about
60% of the web server's CPU per label going into building and compiling
querysets (filter resolution, `as_sql`, cloning), not into the database. An
annotator's turn runs ~20 short statements, so on the load benchmark
(benchmarks/annotate_load.py) the ORM alone capped throughput. Everything
else in Claimlab keeps using the ORM, but for the size of the adjudication
queue (selectors/adjudication.queue_size): an aggregate of an aggregate, which
the ORM cannot express.

What this module keeps from the ORM so that hand-written SQL cannot drift
from the models: table and column names come from `_meta`, values read are
passed through Django's own converters (JSON, booleans and datetimes on
SQLite, time zones), values written through the field's `get_db_prep_save`,
and rows become ordinary model instances via `Model.from_db` (columns not
read are deferred and load on access, as with `.only()`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any, Generic, TypeVar

from django.db import connection, models

ModelT = TypeVar("ModelT", bound=models.Model)
Converter = Callable[[Any, Any, Any], Any]


def quote(name: str | None) -> str:
    if name is None:  # only a non-concrete field has no column, and none is passed here
        raise ValueError("a column without a name cannot be quoted")
    return connection.ops.quote_name(name)


def table(model: type[models.Model]) -> str:
    """The model's quoted table name."""
    return quote(model._meta.db_table)


class Names:
    """A model's quoted table and column names, by field name: `Names(Item).slots_taken`,
    `Names(Item).study` (the `study_id` column), `Names(Item).table`.

    Column names are looked up in `__getattr__` so that every attribute is typed `str`
    for mypy, and a misspelt field name fails at once instead of producing bad SQL.
    """

    def __init__(self, model: type[models.Model]) -> None:
        self.table = table(model)
        self._model_name = model.__name__
        self._columns = {field.name: quote(field.column) for field in model._meta.concrete_fields}

    def __getattr__(self, field_name: str) -> str:
        try:
            return self.__dict__["_columns"][field_name]
        except KeyError:
            raise AttributeError(f"{self.__dict__.get('_model_name', 'model')} has no column {field_name!r}") from None


@cache
def _names(model: type[models.Model], vendor: str) -> Names:
    return Names(model)


def names(model: type[models.Model]) -> Names:
    """Quoted names for hand-written SQL, worked out once per process and database."""
    return _names(model, connection.vendor)


def db_datetime(value: datetime | None) -> Any:
    """A datetime as this database stores it (SQLite: naive UTC text; PostgreSQL: aware)."""
    return connection.ops.adapt_datetimefield_value(value)


def is_stored_pk(model: type[models.Model], value: int) -> bool:
    """Whether `value` fits the model's primary key column. The ORM answers "no such row" for an
    out-of-range id by itself; hand-written SQL would hand it to the driver (SQLite: OverflowError)."""
    low, high = connection.ops.integer_field_range(model._meta.pk.get_internal_type())
    return (low is None or value >= low) and (high is None or value <= high)


def fetch_all(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def fetch_one(sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def execute(sql: str, params: Sequence[Any] = ()) -> int:
    """Run a write; the number of rows it changed (for conditional UPDATEs)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def insert_statement(model: type[models.Model], values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The INSERT of one row from {field name or attname (`study_id`): Python value}, and its parameters."""
    columns, placeholders, params = _insert_parts(model, values)
    return f"INSERT INTO {table(model)} ({columns}) VALUES ({placeholders})", params


def insert_select_statement(
    model: type[models.Model], values: dict[str, Any], computed: dict[str, str], source: str
) -> tuple[str, list[Any]]:
    """`INSERT ... SELECT`: a row of `values` (as `insert_statement`) and of SQL expressions over `source`
    (`computed`, {field name or attname: expression}) for each row of `source` (e.g. a CTE's name)."""
    columns, placeholders, params = _insert_parts(model, values)
    columns += "".join(f", {quote(_concrete_field(model, name).column)}" for name in computed)
    expressions = "".join(f", {expression}" for expression in computed.values())
    return f"INSERT INTO {table(model)} ({columns}) SELECT {placeholders}{expressions} FROM {source}", params


def _insert_parts(model: type[models.Model], values: dict[str, Any]) -> tuple[str, str, list[Any]]:
    """(quoted columns, placeholders, parameters) of one row's values, written as the fields save them."""
    fields = [(_concrete_field(model, name), value) for name, value in values.items()]
    columns = ", ".join(quote(field.column) for field, _ in fields)
    params = [field.get_db_prep_save(value, connection) for field, value in fields]
    return columns, ", ".join(["%s"] * len(fields)), params


def insert_returning_id(model: type[models.Model], values: dict[str, Any]) -> int:
    """INSERT one row from {field name or attname (`study_id`): Python value}; its new primary key."""
    sql, params = insert_statement(model, values)
    with connection.cursor() as cursor:
        if connection.features.can_return_columns_from_insert:
            cursor.execute(f"{sql} RETURNING {quote(model._meta.pk.column)}", params)
            return cursor.fetchone()[0]
        cursor.execute(sql, params)
        return cursor.lastrowid


def _concrete_field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    field = model._meta.get_field(name)
    if not isinstance(field, models.Field) or not field.concrete:
        raise ValueError(f"{model.__name__}.{name} is not a column")
    return field


class ModelRows(Generic[ModelT]):
    """Reads rows of one model from hand-written SQL as model instances.

    `select` gives the column list to put in the SQL (table alias `alias`);
    `instance` turns the matching slice of a result row into a model
    instance, applying the converters Django would have applied. The column
    list and converters are worked out once per process and database.
    """

    def __init__(self, model: type[ModelT], field_names: Iterable[str] | None = None, alias: str | None = None) -> None:
        self.model = model
        concrete = list(model._meta.concrete_fields)
        wanted = None if field_names is None else set(field_names) | {model._meta.pk.name}
        self.fields = [field for field in concrete if wanted is None or field.name in wanted]
        if wanted is not None and len(self.fields) != len(wanted):
            unknown = wanted - {field.name for field in self.fields}
            raise ValueError(f"{model.__name__} has no concrete field(s) {sorted(unknown)}")
        self.attnames = [field.attname for field in self.fields]
        self.alias = alias or model._meta.db_table
        self.width = len(self.fields)

    @property
    def select(self) -> str:
        return _select_list(self.model, tuple(self.attnames), self.alias, connection.vendor)

    def _converters(self) -> list[tuple[int, list[Converter], Any]]:
        return _converters_for(self.model, tuple(self.attnames), connection.alias)

    def instance(self, row: Sequence[Any], start: int = 0) -> ModelT:
        values = list(row[start : start + self.width])
        for position, converters, expression in self._converters():
            value = values[position]
            for converter in converters:
                value = converter(value, expression, connection)
            values[position] = value
        return self.model.from_db(connection.alias, self.attnames, values)


@cache
def _select_list(model: type[models.Model], attnames: tuple[str, ...], alias: str, vendor: str) -> str:
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    return ", ".join(f"{quote(alias)}.{quote(by_attname[name].column)}" for name in attnames)


@cache
def _converters_for(
    model: type[models.Model], attnames: tuple[str, ...], alias: str
) -> list[tuple[int, list[Converter], Any]]:
    """Django's per-column converters (backend's, then the field's), as the SQL compiler collects them."""
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    found = []
    for position, name in enumerate(attnames):
        expression = by_attname[name].get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
        if converters:
            found.append((position, converters, expression))
    return found
