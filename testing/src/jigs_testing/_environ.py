"""Setting host environment variables for the length of a block."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["patched_environ"]


@contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ``; restore what was there (or its absence) afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
