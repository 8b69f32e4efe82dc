"""``manage.py replay_adaptive FILE``: a fixed-N study's labels replayed as if collected with adaptive overlap.

Before choosing the rule of a study (annotation/workbench/adaptive.py), a researcher replays a pilot's
labels (or a published dataset's): the labels it would have saved, and how often its reference label
equals the full-N majority. The README's XSum figure is this command on tests/data/xsum_hallucination.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from django.core.management.base import BaseCommand, CommandError, CommandParser

from metaeval.stats.adaptive import replay_adaptive


class Command(BaseCommand):
    help = "Replay a fixed-N label file (CSV, or CSV.gz) as if items took annotators only until K agreed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="one row per label: a CSV (or .csv.gz), e.g. a study's label export")
        parser.add_argument("--item", default="item", help="the item column, or several joined: bbcid,system")
        parser.add_argument("--label", default="label", help="the label column (empty or NULL: no label)")
        parser.add_argument("--order", help="the column giving each item's labels their order (slot, time)")
        parser.add_argument("--n-min", type=int, default=2, help="annotators every item gets (default 2)")
        parser.add_argument("--agreement", type=int, default=2, help="matching answers that close an item (2)")
        parser.add_argument("--n-max", type=int, default=3, help="the most an item gets (default 3)")
        parser.add_argument("--orders", type=int, default=0, help="also replay this many seeded random orders")
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, **options) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"no such file: {path}")
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (ValueError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path} is not a CSV file: {exc}") from None
        columns = [c.strip() for c in options["item"].split(",")]
        needed = [*columns, options["label"], *([options["order"]] if options["order"] else [])]
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise CommandError(f"{path} has no column(s) {', '.join(missing)}; it has {', '.join(frame.columns)}")
        frame["__item"] = frame[columns].agg("|".join, axis=1)
        labels = frame[options["label"]]
        frame["__label"] = labels.where(~labels.str.strip().isin(["", "NULL", "null", "NaN", "nan"]))
        try:
            out = replay_adaptive(
                frame,
                n_min=options["n_min"],
                k=options["agreement"],
                n_max=options["n_max"],
                item="__item",
                label="__label",
                order=options["order"],
                n_orders=options["orders"],
                seed=options["seed"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(out, indent=2, allow_nan=False))
