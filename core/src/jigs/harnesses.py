"""Descriptor constructors for every installed kind: ``harnesses.claude(model="sonnet")``.

``harnesses.<kind>(**settings)`` resolves the kind's plugin on first use and builds its frozen
descriptor; an uninstalled kind raises :class:`~jigs.errors.HarnessNotFoundError` saying
``pip install jigs-harness-<kind>``. :func:`load` turns stored JSON data back into the right class.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jigs.descriptors import HarnessDescriptor
from jigs.errors import DescriptorError

__all__ = ["installed", "load", "loads"]


def _registry() -> Any:
    from jigs._registry import default_registry

    return default_registry()


def installed() -> list[str]:
    """The installed harness kinds."""
    kinds: list[str] = _registry().kinds()
    return kinds


def load(data: Mapping[str, Any] | HarnessDescriptor) -> HarnessDescriptor:
    """Validate stored descriptor data (with its ``kind``) into the kind's descriptor class."""
    if isinstance(data, HarnessDescriptor):
        return data
    if not isinstance(data, Mapping):
        raise DescriptorError(f"a descriptor must be a mapping with a 'kind', got {type(data)}")
    kind = data.get("kind")
    if not isinstance(kind, str) or not kind:
        raise DescriptorError("a descriptor needs a 'kind' naming its harness kind")
    descriptor_type: type[HarnessDescriptor] = _registry().get(kind).descriptor_type
    return descriptor_type.from_data(data)


def loads(text: str) -> HarnessDescriptor:
    """:func:`load` from a JSON string."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DescriptorError(f"a stored descriptor is not valid JSON: {exc}") from None
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
