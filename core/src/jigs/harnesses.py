"""Descriptor constructors for every installed kind: ``harnesses.claude(model="sonnet")``.

``harnesses.<kind>(**settings)`` resolves the kind's plugin on first use and builds its frozen
descriptor; an uninstalled kind raises :class:`~jigs.errors.HarnessNotFoundError` saying
``pip install jigs-harness-<kind>``. :func:`load` turns stored JSON data back into the right class.
Importing this module loads no plugin and no pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from jigs.errors import DescriptorError
from jigs.registry._registry import default_registry

if TYPE_CHECKING:
    from jigs.descriptors import HarnessDescriptor

__all__ = ["installed", "load", "loads"]


def _registry() -> Any:
    return default_registry()


def installed() -> list[str]:
    """The installed harness kinds."""
    kinds: list[str] = _registry().kinds()
    return kinds


def load(data: Mapping[str, Any] | HarnessDescriptor, *, registry: Any = None) -> HarnessDescriptor:
    """Validate stored descriptor data (with its ``kind``) into the kind's descriptor class,
    resolving the kind through ``registry`` (default: the installed plugins). Raises
    :class:`DescriptorError` for anything that is not such data."""
    from jigs.descriptors import HarnessDescriptor  # here: jigs.descriptors imports this module

    if isinstance(data, HarnessDescriptor):
        return data
    if not isinstance(data, Mapping):
        raise DescriptorError(
            f"a descriptor must be a mapping with a 'kind', got {type(data).__name__}"
        )
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise DescriptorError(
            f"a descriptor's keys must be strings; found a key of type {type(bad[0]).__name__}"
        )
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise DescriptorError("a descriptor needs a 'kind' naming its harness kind")
    reg = registry if registry is not None else _registry()
    descriptor_type: type[HarnessDescriptor] = reg.get(kind).descriptor_type
    return descriptor_type.from_data(data)


def loads(text: str) -> HarnessDescriptor:
    """:func:`load` from a JSON string (a ``describe()`` string too: its ``contents``, the
    digests of the files the settings name, are not settings and are dropped)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DescriptorError(f"a stored descriptor is not valid JSON: {exc}") from None
    if isinstance(data, dict):
        data.pop("contents", None)
    return load(data)


def __getattr__(kind: str) -> Callable[..., HarnessDescriptor]:
    if kind.startswith("__"):
        raise AttributeError(kind)

    def build(**settings: Any) -> HarnessDescriptor:
        descriptor_type: type[HarnessDescriptor] = _registry().get(kind).descriptor_type
        return descriptor_type(kind=kind, **settings)

    build.__name__ = build.__qualname__ = kind
    build.__doc__ = f"Build a {kind} harness descriptor (the plugin resolves on first call)."
    return build
