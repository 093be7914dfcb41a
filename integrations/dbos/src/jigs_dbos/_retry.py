"""Retry or give up: DBOS' ``should_retry`` predicate from ``JigsError.retryable``."""

from __future__ import annotations

from jigs.errors import JigsError

__all__ = ["should_retry"]


def should_retry(error: BaseException) -> bool:
    """Whether DBOS should run the step again after ``error``.

    A :class:`~jigs.errors.JigsError` decides with its ``retryable`` attribute (a busy worktree,
    a crashed CLI or a timeout: yes; a bad descriptor, a missing kind, a kind without a model, a
    limit reached: no). Any other exception is retried, as DBOS does by default.
    """
    if isinstance(error, JigsError):
        return bool(error.retryable)
    return True
