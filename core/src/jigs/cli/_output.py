"""Terminal output of the ``jigs`` command: tables whose last column wraps, colour and a spinner.

Plain text when the stream is not a terminal: no colour, no spinner (a progress line instead),
and tables wrap only when ``COLUMNS`` asks for a width. On a terminal the table fits its width,
``ok``/``FAIL`` are coloured unless ``NO_COLOR`` is set, and :func:`progress` draws a spinner
with the elapsed seconds on one line that it clears when done. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TextIO

__all__ = ["is_tty", "paint", "progress", "table", "wrap"]

_MIN_LAST = 24  # narrowest the wrapped column gets, however wide the others are
_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_COLOURS = {"ok": "32", "FAIL": "31", "skipped": "33"}


def is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced or closed stream
        return False


def _width(stream: TextIO) -> int | None:
    """The width to fit: ``COLUMNS`` if set, else the terminal's; None (no wrapping) when the
    stream is not a terminal and ``COLUMNS`` is unset."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if not is_tty(stream):
        return None
    return shutil.get_terminal_size((100, 24)).columns


def paint(word: str, stream: TextIO) -> str:
    """``word`` coloured for ``stream`` (ok green, FAIL red); unchanged off a terminal or with
    ``NO_COLOR``."""
    code = _COLOURS.get(word)
    if code is None or not is_tty(stream) or os.environ.get("NO_COLOR"):
        return word
    return f"\x1b[{code}m{word}\x1b[0m"


def wrap(text: str, *, stream: TextIO | None = None, indent: int = 5) -> str:
    """``text`` wrapped to the width of ``stream`` (see :func:`_width`), continuation lines
    indented by ``indent``; unchanged when there is no width."""
    width = _width(stream or sys.stdout)
    if width is None:
        return text
    return "\n".join(
        textwrap.wrap(
            text,
            max(_MIN_LAST, width),
            subsequent_indent=" " * indent,
            break_on_hyphens=False,
        )
    )


def table(
    rows: Sequence[Sequence[str]], header: Sequence[str], *, stream: TextIO | None = None
) -> str:
    """``rows`` under ``header``, columns padded; the last column wraps to fit the width of
    ``stream`` (see :func:`_width`), continuation lines indented under it."""
    out = stream or sys.stdout
    cells = [[str(c) for c in r] for r in [header, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header) - 1)]
    indent = sum(widths) + 2 * len(widths)
    width = _width(out)
    last_width = None if width is None else max(_MIN_LAST, width - indent)
    lines = []
    for number, row in enumerate(cells):
        last = row[-1]
        pieces = (
            textwrap.wrap(last, last_width, break_on_hyphens=False) or [""]
            if last_width is not None
            else [last]
        )
        lead = "  ".join(
            (paint(c, out) + " " * (w - len(c))) if number else c.ljust(w)
            for c, w in zip(row[:-1], widths, strict=True)
        )
        lines.append(f"{lead}  {pieces[0]}".rstrip())
        lines += [(" " * indent + p).rstrip() for p in pieces[1:]]
        if number == 0:
            last_rule = max(len(r[-1]) for r in cells)
            if last_width is not None:
                last_rule = min(last_rule, last_width)
            lines.append("  ".join("-" * w for w in [*widths, last_rule]))
    return "\n".join(lines)


@contextmanager
def progress(message: str, *, stream: TextIO | None = None) -> Iterator[None]:
    """Show that ``message`` is under way while the body runs: a spinner with elapsed seconds
    on a terminal (drawn by a daemon thread; the line is cleared at the end), else one plain
    ``message...`` line."""
    out = stream or sys.stderr
    if not is_tty(out):
        print(f"{message}...", file=out, flush=True)
        yield
        return
    started = time.monotonic()
    done = threading.Event()

    def spin() -> None:
        frame = 0
        while not done.is_set():
            seconds = time.monotonic() - started
            out.write(f"\r{_FRAMES[frame % len(_FRAMES)]} {message} ({seconds:.0f}s)\x1b[K")
            out.flush()
            frame += 1
            done.wait(0.1)
        out.write("\r\x1b[K")
        out.flush()

    thread = threading.Thread(target=spin, name="jigs-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
