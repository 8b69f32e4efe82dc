"""The verifier package imports in any order: no import cycle held together by imports inside functions."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "metaeval" / "verifiers"


def verifier_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_no_imports_inside_functions():
    found = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [
                    f"{path.relative_to(REPO)}:{inner.lineno}"
                    for inner in ast.walk(node)
                    if isinstance(inner, (ast.Import, ast.ImportFrom))
                ]
    assert found == []


def test_every_module_imports_first():
    """Each module imported with nothing of the package loaded before (a cycle fails whichever module starts it)."""
    script = """
import importlib, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
import django
django.setup()
import metaeval
modules = sys.argv[1:]
for first in modules:
    for name in [name for name in sys.modules if name == "metaeval.verifiers" or name.startswith("metaeval.verifiers.")]:
        del sys.modules[name]
    if hasattr(metaeval, "verifiers"):
        del metaeval.verifiers
    try:
        importlib.import_module(first)
    except Exception as exc:
        sys.exit(f"importing {first} first: {type(exc).__name__}: {exc}")
"""
    result = subprocess.run(
        [sys.executable, "-c", script, *verifier_modules()], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
