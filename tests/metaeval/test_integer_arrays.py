"""The big reads' integer arrays arrive as numpy arrays with the values PostgreSQL sent (metaeval.snapshot_reads).

The loader reads PostgreSQL's binary array format itself (a header, then each element's length
and big-endian value); an array it does not handle (NULLs, several dimensions) goes through
psycopg's own loader. The bytes here are built as the server sends them.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

from metaeval.snapshot_reads import _IntegerArrayLoader

ELEMENTS = {20: ("!q", 1016), 23: ("!i", 1007), 21: ("!h", 1005)}  # element oid: (format, array oid)


def binary_array(element_oid: int, values: list[int | None]) -> bytes:
    """``values`` as PostgreSQL's binary send function writes a one-dimensional array."""
    fmt, _ = ELEMENTS[element_oid]
    size = struct.calcsize(fmt)
    has_nulls = int(any(v is None for v in values))
    out = struct.pack("!iiiii", 1, has_nulls, element_oid, len(values), 1)
    for value in values:
        out += struct.pack("!i", -1) if value is None else struct.pack("!i", size) + struct.pack(fmt, value)
    return out


@pytest.mark.parametrize(
    ("element_oid", "values"),
    [
        (20, [1, -1, 0, 2**62 + 5, -(2**63), 300_000]),
        (23, [7, -2_147_483_648, 2_147_483_647, 0]),
        (21, [-32_768, 32_767, 1]),
    ],
)
def test_an_integer_array_is_an_int64_numpy_array_of_its_values(element_oid, values):
    loaded = _IntegerArrayLoader(ELEMENTS[element_oid][1]).load(binary_array(element_oid, values))
    assert isinstance(loaded, np.ndarray) and loaded.dtype == np.int64
    assert loaded.tolist() == values


def test_an_empty_array_is_an_empty_int64_array():
    loaded = _IntegerArrayLoader(1016).load(struct.pack("!iii", 0, 0, 20))
    assert isinstance(loaded, np.ndarray) and loaded.dtype == np.int64 and len(loaded) == 0


def test_an_array_with_nulls_goes_through_psycopgs_loader():
    loaded = _IntegerArrayLoader(1016).load(binary_array(20, [3, None, -4]))
    assert loaded == [3, None, -4]
