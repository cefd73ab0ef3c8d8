"""No import circles inside ``tokenwatt``, not even hidden ones.

The graph is grimp's (import-linter's own): every ``import`` statement of every module,
including those inside functions and under ``if TYPE_CHECKING:``, since an import moved
into a function or behind ``TYPE_CHECKING`` still leaves the two modules depending on each
other. A circle is a strongly connected component of more than one module; each one found
is listed with the imports that close it. Break one by moving the shared thing down into
a lower module, or by inverting the dependency (ARCHITECTURE.md, "Where a new module goes").
"""

from __future__ import annotations

import grimp
import pytest

PACKAGE = "tokenwatt"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # cache_dir=None: no .grimp_cache written by a test.
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def _edges(graph: grimp.ImportGraph) -> dict[str, set[str]]:
    return {
        m: {i for i in graph.find_modules_directly_imported_by(m) if i.startswith(PACKAGE)}
        for m in graph.modules
        if m == PACKAGE or m.startswith(PACKAGE + ".")
    }


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def test_strongly_connected_finds_a_circle_and_leaves_a_chain() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert strongly_connected(edges) == [["a", "b", "c"], ["d"], ["e"]]


def test_the_graph_sees_function_level_and_type_checking_imports(
    graph: grimp.ImportGraph,
) -> None:
    """The check is only as good as its graph: ``cli.collect`` imports the collect stage inside its
    commands, and ``collect.workload.tokens`` imports ``records`` only for type checking."""
    assert graph.direct_import_exists(
        importer="tokenwatt.cli.collect", imported="tokenwatt.collect"
    )
    assert graph.direct_import_exists(
        importer="tokenwatt.collect.workload.tokens", imported="tokenwatt.records"
    )


def test_no_import_circles_in_tokenwatt(graph: grimp.ImportGraph) -> None:
    edges = _edges(graph)
    circles = [c for c in strongly_connected(edges) if len(c) > 1]
    lines = []
    for circle in circles:
        members = set(circle)
        lines.append(f"{len(circle)} modules:")
        for m in circle:
            inside = sorted(edges[m] & members)
            lines.append(f"  {m} -> {', '.join(inside)}")
    assert not circles, "import circles in tokenwatt:\n" + "\n".join(lines)
