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


# The one deferred import: the task that runs a chunk loads the runner (and with it the openai
# client, ~1.5 s of imports) when it runs, so web processes, which queue the task, never load it.
DEFERRED = {("metaeval/verifiers/tasks.py", "metaeval.verifiers.runner.orchestration")}


def _imported(node: ast.Import | ast.ImportFrom, path: Path) -> str:
    """The absolute module name an import statement names."""
    if isinstance(node, ast.Import):
        return node.names[0].name
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.level else str(node.module)


def test_no_imports_inside_functions():
    found, deferred = [], set()
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(REPO))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        if (where, _imported(inner, path)) in DEFERRED:
                            deferred.add((where, _imported(inner, path)))
                        else:
                            found.append(f"{where}:{inner.lineno}")
    assert found == []
    assert deferred == DEFERRED


def test_every_module_imports_first():
    """Each module imported with nothing of the package loaded before (a cycle fails whichever module starts it)."""
    script = """
import importlib, os, sys
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings_test"
import django
django.setup()
import metaeval
# A web process (settings, apps and admin, every URL's view) must not load the openai client.
import config.urls
from django.urls import get_resolver
get_resolver().url_patterns
if "openai" in sys.modules:
    sys.exit("a web process imports openai (the runner's client); only the chunk task may")
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
