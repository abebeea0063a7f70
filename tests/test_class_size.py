"""No class in the packages defines more than `MAX_METHODS` methods in its body.

A class past it does several jobs at once: split it by job, as the journal's contract is
split into roles (`journal.store`) and the SQL stores into one class per role
(`journal._sql_journal`). Methods a class inherits do not count, nor functions nested in
its methods; properties, static and class methods do.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .test_exports import ROOT, TOP

MAX_METHODS = 30


def _method_counts(tree: ast.AST) -> dict[str, int]:
    """Each class of ``tree`` (nested ones by their dotted path) -> methods in its body."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                found[name] = sum(
                    isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) for item in child.body
                )
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _package_classes() -> dict[str, int]:
    """Every class in the packages, as ``path:Class``, -> methods in its body."""
    counts: dict[str, int] = {}
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            where = Path(path).relative_to(ROOT)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, count in _method_counts(tree).items():
                counts[f"{where}:{name}"] = count
    return counts


def test_no_class_in_the_packages_has_more_than_30_methods() -> None:
    counts = _package_classes()
    assert len(counts) > 100, "the scan found (almost) no class: it is broken"
    assert {name: n for name, n in counts.items() if n > MAX_METHODS} == {}


def test_the_count_is_of_what_a_class_body_defines() -> None:
    tree = ast.parse(
        "class A(Base):\n"
        "    x = 1\n"
        "    def f(self):\n"
        "        def nested(): ...\n"
        "    async def g(self): ...\n"
        "    @property\n"
        "    def h(self): ...\n"
        "    @staticmethod\n"
        "    def s(): ...\n"
        "    class B:\n"
        "        def i(self): ...\n"
        "def outside(): ...\n"
    )
    assert _method_counts(tree) == {"A": 4, "A.B": 1}
