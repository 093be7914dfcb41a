"""The layout of ``core/src/jigs``: public modules at the top, each private area in a subpackage."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

JIGS = Path(__file__).resolve().parents[2] / "core/src/jigs"

#: Subpackages that hold only private modules: their ``__init__`` is a docstring, so importing one
#: module of an area does not import its siblings.
PRIVATE_AREAS = ("engine", "policy", "registry")


def side_by_side() -> list[str]:
    """The modules and packages at the top of ``jigs`` (its own ``__init__`` is not a sibling)."""
    modules = [p.stem for p in JIGS.glob("*.py") if p.name != "__init__.py"]
    packages = [p.name for p in JIGS.iterdir() if (p / "__init__.py").is_file()]
    return sorted(modules + packages)


def test_no_more_than_twenty_modules_side_by_side() -> None:
    names = side_by_side()
    assert {"steps", "errors", "cli", "engine", "sandbox"} <= set(names), names
    assert len(names) <= 20, names


def test_private_modules_live_in_a_subpackage() -> None:
    """The top holds the public surface only; a private module goes into the area it serves."""
    assert [p.name for p in JIGS.glob("_*.py") if p.name != "__init__.py"] == []


@pytest.mark.parametrize("area", PRIVATE_AREAS)
def test_a_private_area_imports_nothing_on_its_own(area: str) -> None:
    init = JIGS / area / "__init__.py"
    tree = ast.parse(init.read_text())
    assert [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] == []
    assert ast.get_docstring(tree), f"{area}/__init__.py says what the area holds"
    modules = [p.name for p in (JIGS / area).glob("*.py") if p.name != "__init__.py"]
    assert modules
    assert all(name.startswith("_") for name in modules), modules
