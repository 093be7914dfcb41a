"""A URL's host name as bytes for the wire, checked the way the ``idna`` codec checks it."""

from __future__ import annotations

__all__ = ["INVALID_HOST", "host_bytes", "valid_host"]

#: Why :func:`valid_host` refused a host, for the errors that say so.
INVALID_HOST = (
    "an invalid host name: an empty or over-long label (each part between dots 1-63 "
    "characters) or characters IDNA refuses"
)


def host_bytes(host: str) -> bytes:
    """``host`` as ``host.encode("idna")`` gives it, without loading the codec for an ASCII host
    (a fresh process pays about a millisecond for it): an ASCII host is returned as it is once
    every dot-separated label is 1-63 characters long (the last may be empty: a trailing dot),
    which is all the codec checks for ASCII; any other host goes through the codec.

    Raises ``UnicodeError`` (as the codec does) for an empty or over-long label."""
    if host.isascii():
        *labels, last = host.split(".")
        if all(0 < len(label) < 64 for label in labels) and len(last) < 64:
            return host.encode("ascii")
        raise UnicodeError("label empty or too long")
    return host.encode("idna")


def valid_host(host: str) -> bool:
    """Whether :func:`host_bytes` can encode ``host`` (the check every URL jigs takes gets)."""
    try:
        host_bytes(host)
    except UnicodeError:
        return False
    return True
