"""Package attributes imported on first access (PEP 562).

A step may run in a fresh process, so a package whose public names are costly to import (pydantic
models, the turn engine) lists them here and imports each one when it is first used.
"""

from __future__ import annotations

import sys
from importlib import import_module

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: keep this import cheap
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``(__getattr__, __dir__)`` pair for ``package``, whose ``exports`` map each public
    name to the module defining it.

    A name is imported on first access and then kept in the package's namespace, so later
    accesses cost nothing. A name not in ``exports`` raises :class:`AttributeError` naming the
    package; an import error of the defining module propagates unchanged.
    """

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(where), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
