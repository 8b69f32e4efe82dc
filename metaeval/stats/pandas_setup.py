"""One pandas option the statistics depend on, set when ``metaeval.stats`` is imported.

pandas 3 stores text columns with pyarrow whenever pyarrow is installed
(``string_storage="auto"``), and with Python objects otherwise. The two are
not interchangeable: for example a group mean over an all-missing column
mapped from text fails with pyarrow storage. pyarrow is installed for the
Hugging Face export (parquet), so the statistics pin the storage they are
written and tested with, and give the same numbers whether it is present.
"""

from __future__ import annotations

import pandas as pd

STRING_STORAGE = "python"

pd.options.mode.string_storage = STRING_STORAGE
