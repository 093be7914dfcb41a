"""jigs-harness-opencode is written as a third party would: it imports public jigs modules only
(no ``jigs._x``, no ``jigs.engine._types``, no ``jigs_testing._server``), by statement or by a
module name in a string (``importlib.import_module``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jigs_harness_opencode

PACKAGE = Path(jigs_harness_opencode.__file__).parent
#: a dotted jigs or jigs_testing module path one of whose parts is private (starts with "_")
_PRIVATE_IN_TEXT = re.compile(r"\bjigs(?:_testing)?(?:\.[A-Za-z0-9_]+)*\._[A-Za-z0-9_]*")


def _is_jigs(module: str) -> bool:
    top = module.split(".", 1)[0]
    return top in {"jigs", "jigs_testing"}


def private_imports(source: str) -> list[str]:
    """Every private jigs module ``source`` imports or names, as ``line: module``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from jigs.policy import _secrets`` imports a private module too
            names = [f"{node.module}.{alias.name}" for alias in node.names]
            if any(part.startswith("_") for part in node.module.split(".")):
                names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = _PRIVATE_IN_TEXT.findall(node.value)
        for name in names:
            if _is_jigs(name) and any(part.startswith("_") for part in name.split(".")):
                found.append(f"{getattr(node, 'lineno', '?')}: {name}")
    return found


def test_the_kind_imports_only_public_jigs_modules() -> None:
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) >= 8, sources  # the whole package is checked, not an empty glob
    offending = {
        str(path.relative_to(PACKAGE)): hits
        for path in sources
        if (hits := private_imports(path.read_text()))
    }
    assert not offending, offending


def test_the_check_catches_every_way_of_reaching_a_private_module() -> None:
    hostile = {
        "import jigs._secrets": "jigs._secrets",
        "import jigs.engine._types as t": "jigs.engine._types",
        "from jigs.policy._secrets import shown": "jigs.policy._secrets",
        "from jigs.policy import _secrets": "jigs.policy._secrets",
        "from jigs_testing._server.server import ModelServer": "jigs_testing._server.server",
        "importlib.import_module('jigs.proxy._endpoint')": "jigs.proxy._endpoint",
    }
    for source, module in hostile.items():
        assert private_imports(source) == [f"1: {module}"], source
    public = "from jigs.plugin.tools import write_atomic\nimport jigs.executables\nimport _thread"
    assert private_imports(public) == []
