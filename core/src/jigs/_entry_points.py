"""The entry points of one group, read straight from the metadata folders on ``sys.path``.

``importlib.metadata.entry_points(group=...)`` answers the same question, but a fresh process
pays for importing it (email, zipfile, csv, ...) and for building every distribution's metadata
objects: tens of ms before a step's first kind resolves. This reader follows the same rules and
reads nothing else: every ``sys.path`` entry in order (``""`` is the current directory), every
``*.dist-info`` / ``*.egg-info`` folder in it, the first distribution of each normalised name
wins, and each one's ``entry_points.txt`` is parsed the way importlib.metadata parses it. Nothing
is cached across calls, so a kind installed a moment ago is found.

When ``sys.path`` holds something this reader does not model (a zip file, an ``.egg``, a
non-string entry), another meta path finder serves distributions of its own, or reading fails
in a way listing a folder cannot (a sandbox that forbids file access, as Temporal's workflow
sandbox does for non-stdlib modules), it asks importlib.metadata instead, so the answer is never
different from the standard one.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

__all__ = ["SHOW_TEST_KINDS", "TEST_GROUP", "FoundEntryPoint", "entry_points", "hidden_test_kinds"]

#: The group a distribution also declares a kind in to make it a test kind (jigs' echo kind).
TEST_GROUP = "jigs.test_kinds"
#: Set (to anything but ``0``) to list the test kinds too.
SHOW_TEST_KINDS = "JIGS_SHOW_TEST_KINDS"


@dataclass(frozen=True)
class FoundEntryPoint:
    """One entry point: ``name = value`` in ``group``, from the distribution whose metadata
    folder is ``folder`` (None when importlib.metadata found it: ``dist`` is then filled)."""

    name: str
    value: str
    group: str
    folder: str | None = None
    dist: tuple[str | None, str | None] | None = None

    def distribution(self) -> tuple[str | None, str | None]:
        """The distribution's ``Name`` and ``Version`` as its metadata states them (None when
        absent or unreadable)."""
        if self.dist is not None:
            return self.dist
        if self.folder is None:
            return None, None
        return _name_and_version(self.folder)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _name_and_version(folder: str) -> tuple[str | None, str | None]:
    headers = "PKG-INFO" if folder.lower().endswith(".egg-info") else "METADATA"
    found: dict[str, str] = {}
    try:
        with open(os.path.join(folder, headers), encoding="utf-8", errors="replace") as file:
            for line in file:
                if not line.strip():
                    break  # the headers end at the first blank line
                key, sep, value = line.partition(":")
                if sep and key in ("Name", "Version") and key not in found:
                    found[key] = value.strip()
    except OSError:
        pass
    except Exception:  # a sandbox forbidding file access: ask importlib.metadata
        from importlib.metadata import PathDistribution
        from pathlib import Path

        dist = PathDistribution(Path(folder))
        return dist.metadata["Name"], dist.version
    return found.get("Name"), found.get("Version")


def _parse(text: str, group: str) -> list[tuple[str, str]]:
    """``name = value`` pairs of ``[group]`` in an ``entry_points.txt`` (importlib.metadata's
    ``Sectioned`` rules: stripped lines, ``#`` comments, the first ``=`` splits; a line without
    one, which makes importlib.metadata raise, is skipped)."""
    pairs: list[tuple[str, str]] = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
            continue
        name, sep, value = line.partition("=")
        if section == group and sep:
            pairs.append((name.strip(), value.strip()))
    return pairs


def _standard_layout() -> bool:
    """Whether every distribution importlib.metadata could find lives in a folder we read."""
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions"):
            return False
    entries: list[object] = list(sys.path)  # anything can be appended to sys.path
    for entry in entries:
        if not isinstance(entry, str):
            return False
        if entry.lower().endswith(".egg") or (entry and os.path.isfile(entry)):
            return False
    return True


def _from_importlib(group: str) -> list[FoundEntryPoint]:
    from importlib.metadata import entry_points as standard

    found = []
    for ep in standard(group=group):
        dist = ep.dist
        about = (dist.metadata["Name"], dist.version) if dist is not None else (None, None)
        found.append(FoundEntryPoint(ep.name, ep.value, group, dist=about))
    return found


def entry_points(group: str) -> list[FoundEntryPoint]:
    """The entry points of ``group`` of every installed distribution, in ``sys.path`` order."""
    try:
        if _standard_layout():
            return _scan(group)
    except Exception:  # e.g. a sandbox (Temporal's workflow sandbox) that
        pass  # forbids file access to non-stdlib modules: the standard reader still may
    return _from_importlib(group)


def _scan(group: str) -> list[FoundEntryPoint]:
    seen: set[str] = set()
    found: list[FoundEntryPoint] = []
    for entry in sys.path:
        root = entry or os.getcwd()
        try:
            children = os.listdir(root)
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            normalized = _normalize(low.rpartition(".")[0].partition("-")[0])
            if normalized in seen:
                continue
            seen.add(normalized)
            folder = os.path.join(root, child)
            try:
                with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8") as file:
                    text = file.read()
            except (OSError, ValueError):
                continue
            found.extend(
                FoundEntryPoint(name, value, group, folder) for name, value in _parse(text, group)
            )
    return found


def hidden_test_kinds() -> frozenset[str]:
    """The test kinds (entry points in :data:`TEST_GROUP`) that jigs' listings leave out (they
    still resolve by name): none when ``JIGS_SHOW_TEST_KINDS`` is set to anything but ``0``."""
    if os.environ.get(SHOW_TEST_KINDS, "") not in ("", "0"):
        return frozenset()
    return frozenset(ep.name for ep in entry_points(TEST_GROUP))
