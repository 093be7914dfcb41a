"""jigs: open coding-agent CLIs for workflow steps, under one policy.

``import jigs`` is cheap: names resolve on first use (a step may run in a fresh process).
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs more than jigs itself
if TYPE_CHECKING:
    from typing import Any

    from jigs import harnesses
    from jigs._types import AgentSessionRef, RunMetadata
    from jigs.errors import JigsError

__all__ = ["AgentSessionRef", "JigsError", "RunMetadata", "__version__", "harnesses"]

_LAZY = {
    "AgentSessionRef": ("jigs._types", "AgentSessionRef"),
    "RunMetadata": ("jigs._types", "RunMetadata"),
    "JigsError": ("jigs.errors", "JigsError"),
    "harnesses": ("jigs.harnesses", None),
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("jigs-core")
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'jigs' has no attribute {name!r}") from None
    import importlib

    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
