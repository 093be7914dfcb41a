"""Skills a descriptor declares (``skills=[path, ...]``): checked as data, copied into a step's
private dir, and digested so that a changed skill changes the descriptor's ``describe()``.

A skill is a directory holding ``SKILL.md`` (its name is the directory's), or one Markdown file
(its name is the file's stem; a lone ``SKILL.md`` takes its directory's name). Paths are absolute:
``describe()`` reads them without a worktree. Symlinks inside a skill are not followed (a skill
cannot pull in files from elsewhere on the machine).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

__all__ = ["check_skill_path", "copy_skills", "skill_name", "skills_digest"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_MAX_FILES = 500


def check_skill_path(value: str, where: str) -> str:
    """``value`` when it is an absolute path without NUL bytes whose skill name is usable;
    ``ValueError`` naming ``where`` otherwise."""
    if "\x00" in value or not os.path.isabs(value):
        raise ValueError(
            f"{where}: a skill is an absolute path (a directory with SKILL.md, or one .md file)"
        )
    if not _NAME.fullmatch(skill_name(value)):
        raise ValueError(
            f"{where}: a skill's name (its directory's or file's) is letters, digits, '.', '_' "
            "or '-', at most 64"
        )
    return value


def skill_name(path: str | Path) -> str:
    """The name a skill is copied under."""
    p = Path(path)
    if p.suffix == ".md":
        return p.parent.name if p.name == "SKILL.md" else p.stem
    return p.name


def _files(path: Path) -> list[tuple[str, Path]]:
    """``(relative name, file)`` of a skill, sorted; ``OSError`` when it is not a skill."""
    if path.is_file():
        return [("SKILL.md", path)]
    if not (path / "SKILL.md").is_file():
        raise FileNotFoundError(f"{path} is neither a .md file nor a directory with SKILL.md")
    found: list[tuple[str, Path]] = []
    for root, dirs, files in os.walk(path):  # never follows symlinked directories
        dirs.sort()
        for name in sorted(files):
            file = Path(root, name)
            if file.is_symlink() or not file.is_file():
                continue
            found.append((file.relative_to(path).as_posix(), file))
            if len(found) > _MAX_FILES:
                raise OSError(f"{path} holds more than {_MAX_FILES} files; is it a skill?")
    return found


def skills_digest(paths: Sequence[str]) -> str:
    """A digest of every skill's name, files and contents (``"missing"`` parts for a skill that
    cannot be read: the step's checks refuse it)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(f"\0skill {skill_name(path)}\0".encode())
        try:
            for name, file in _files(Path(path)):
                digest.update(f"\0{name}\0".encode())
                digest.update(file.read_bytes())
        except OSError:
            digest.update(b"\0missing\0")
    return digest.hexdigest()[:32]


def copy_skills(paths: Sequence[str], dest: Path) -> list[Path]:
    """Copy each skill to ``dest/<name>/`` (``dest`` made 0700); the copies' directories.
    Raises ``OSError`` naming a skill that cannot be read."""
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    made = []
    for path in paths:
        target = dest / skill_name(path)
        if target.exists():
            raise FileExistsError(f"two skills are named {target.name!r}")
        for name, file in _files(Path(path)):
            out = target / name
            out.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            shutil.copyfile(file, out)
        made.append(target)
    return made
