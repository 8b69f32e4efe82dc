"""No import circles in the project's code, counting imports inside functions and under TYPE_CHECKING.

import-linter (the contracts in `.importlinter`, run by `make lint`) keeps the features and the
apps in one direction; its `acyclic_siblings` contract checks packages against their siblings,
not modules. This test checks modules: it builds the import graph of the four packages with
grimp (the library import-linter reads imports with; it counts an import wherever it is written,
in a function or under `if TYPE_CHECKING:`) and finds its strongly connected components. A module
that reaches itself through its imports is a circle, whether Python would notice at import time
or only when a function runs.
"""

from __future__ import annotations

import grimp

PACKAGES = ("accounts", "annotation", "metaeval", "config")


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself)."""
    modules = sorted(graph.modules)
    edges = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        # Tarjan's algorithm, iterative (the graph is deep enough to reach Python's recursion limit).
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[module] = min(low[module], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1 or module in edges[module]:
                        circles.append(sorted(component))
    return sorted(circles)


def test_no_import_circles():
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=False)
    circles = import_circles(graph)
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(circle) for circle in circles)


def test_the_check_finds_a_circle():
    """The finder reports a circle through a function-level import (the kind Python only meets late)."""
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(module)
    graph.add_import(importer="pkg.a", imported="pkg.b", line_number=1, line_contents="from pkg import b")
    graph.add_import(importer="pkg.b", imported="pkg.a", line_number=9, line_contents="    from pkg import a")
    graph.add_import(importer="pkg.c", imported="pkg.a", line_number=1, line_contents="from pkg import a")
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]
