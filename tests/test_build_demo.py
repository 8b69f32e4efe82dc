"""fixtures/build_demo.py rebuilds the shipped demo fixtures byte for byte from the data in tests/data."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
HAND_WRITTEN = {"README.md", "build_demo.py"}


def test_build_demo_from_the_repository_data_reproduces_the_shipped_fixtures(tmp_path):
    done = subprocess.run(
        [sys.executable, str(FIXTURES / "build_demo.py"), "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    built = sorted(path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file())
    shipped = sorted(
        name
        for name in (
            path.relative_to(FIXTURES).as_posix()
            for path in FIXTURES.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        )
        if name not in HAND_WRITTEN
    )
    assert built == shipped
    for name in built:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
