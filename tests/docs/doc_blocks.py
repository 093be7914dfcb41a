"""The fenced code blocks of the README and the docs site, with their test convention.

A block's info string is its language, then ``key="value"`` options (GitHub shows the language;
the site renders the fence as plain code thanks to superfences' ``relaxed_headers``). Python
blocks (``python`` / ``py``) take these options:

- none: the block is **run** as a module of its own (top-level ``await`` allowed), in a scratch
  directory, with a scratch HOME and jigs data dir;
- ``drive="NAME"``: run, then the driver ``NAME`` of ``tests/docs/test_blocks.py`` calls what the
  block defined, for real (a real CLI against the local model server, or the echo kind);
- ``file="PATH"``: a file of the package a page builds (the author's guide): blocks naming the
  same path are joined in order (with the blank lines PEP 8 puts before a method or a class), and
  the page's driver runs the package;
- ``test="typecheck"``: for a block that truly cannot run here (it needs a service or a real
  account): checked with ``mypy --strict`` instead, never run.

``file="PATH"`` also fits other languages (the guide's ``pyproject.toml``). ``toml`` blocks must
parse. Any other option, or a value not listed here, is an error: nothing is
skipped silently. A small extractor rather than pytest-examples: the convention lives in the
fence (pytest-examples keys its settings on the source, not on fence options), and file blocks
must be assembled into one package before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_OPTION = re.compile(r'(?P<key>[A-Za-z_][\w-]*)="(?P<value>[^"]*)"')
OPTIONS = {"test", "drive", "file"}
PYTHON = {"python", "py"}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language and options, and its source."""

    path: Path
    line: int
    lang: str
    options: dict[str, str] = field(hash=False)
    source: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON

    @property
    def mode(self) -> str:
        """``run``, ``typecheck`` or ``file``."""
        if "file" in self.options:
            return "file"
        return self.options.get("test", "run")


def parse_info(info: str) -> tuple[str, dict[str, str], str]:
    """``python drive="x"`` -> ("python", {"drive": "x"}, leftover text that is no option)."""
    lang, _, rest = info.strip().partition(" ")
    options = {m["key"]: m["value"] for m in _OPTION.finditer(rest)}
    leftover = _OPTION.sub("", rest).strip()
    return lang, options, leftover


def blocks_in(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file (indented fences in lists included)."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        lang, options, leftover = parse_info(m["info"])
        if leftover:
            raise ValueError(f"{path}:{i + 1}: unparsed fence options {leftover!r}")
        body: list[str] = []
        j = i + 1
        while j < len(lines):
            line = lines[j]
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                break
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        else:
            raise ValueError(f"{path}:{i + 1}: unclosed fence")
        found.append(Block(path, i + 1, lang, options, "\n".join(body) + "\n"))
        i = j + 1
    return found


def markdown_files() -> list[Path]:
    """README.md and every page of the docs site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def all_blocks() -> list[Block]:
    return [block for path in markdown_files() for block in blocks_in(path)]


def check_options(block: Block) -> list[str]:
    """What is wrong with a block's options (empty: nothing)."""
    problems = [f"unknown option {key!r}" for key in block.options if key not in OPTIONS]
    if not block.is_python and set(block.options) - {"file"}:
        problems.append(f"options other than file= on a {block.lang or 'plain'} block")
    test = block.options.get("test")
    if test is not None and test not in {"run", "typecheck"}:
        problems.append(f'test="{test}": use test="run" (the default) or test="typecheck"')
    if "file" in block.options and len(block.options) > 1:
        problems.append("a file= block takes no other option")
    if test == "typecheck" and "drive" in block.options:
        problems.append('a test="typecheck" block is not run, so it cannot be driven')
    return problems


def assemble(path: Path, dest: Path) -> list[Path]:
    """Write the ``file=`` blocks of page ``path`` under ``dest`` (same path: joined in order)."""
    files: dict[str, list[str]] = {}
    for block in blocks_in(path):
        if "file" in block.options:
            files.setdefault(block.options["file"], []).append(block.source)
    written = []
    for name, parts in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = parts[0]
        for part in parts[1:]:  # a blank line before a method, two before a top-level statement
            text += ("\n" if part.startswith((" ", "\t")) else "\n\n") + part
        target.write_text(text)
        written.append(target)
    return written
