"""Setting host environment variables for the length of a block."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

__all__ = ["patched_environ"]


@contextmanager
def patched_environ(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` (a None value unsets the variable); restore what was
    there (or its absence) afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
