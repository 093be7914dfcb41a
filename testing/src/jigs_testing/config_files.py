"""How a harness kind declares the config files its CLI reads by itself, for the kit.

The conformance kit (:mod:`jigs_testing.conformance`) plants a hostile version of every file a
kind declares and requires that none changes the step. A kind declares them with a
``config_files()`` method on its harness class returning :class:`ConfigFile` entries (``()`` for
a CLI that reads none); like ``demo_plan`` it is a hook of the kit, not of the core contract, so
a kind's distribution needs jigs-testing only where the kit runs: import these names under
``TYPE_CHECKING`` and inside the method::

    if TYPE_CHECKING:
        from jigs_testing import ConfigFile

    class MyHarness(Harness[MyDescriptor]):
        def config_files(self) -> Sequence[ConfigFile]:
            from my_kind._config_files import CONFIG_FILES  # imports jigs_testing

            return CONFIG_FILES
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["ConfigFile", "Planted", "config_files_of"]


@dataclass(frozen=True)
class Planted:
    """What the conformance kit hands a :class:`ConfigFile` writer to make a hostile file.

    ``markers`` is a directory: a hostile hook, helper, notifier, MCP server or extension should
    create a file there (:meth:`command` / :meth:`argv` do); ``anthropic_base_url`` and
    ``openai_base_url`` are a second, planted model endpoint; ``env_name`` = ``env_value`` is
    the variable a hostile file tries to inject into the agent's commands.
    """

    markers: Path
    anthropic_base_url: str
    openai_base_url: str
    env_name: str
    env_value: str

    def marker(self, name: str) -> Path:
        """The marker file ``name`` (a hostile file names each of its payloads)."""
        return self.markers / name

    def command(self, name: str) -> str:
        """A shell command that creates the marker ``name``."""
        return f"touch {shlex.quote(str(self.marker(name)))}"

    def argv(self, name: str) -> list[str]:
        """The same as an argv (for MCP servers, notifiers, helper programs)."""
        return ["/bin/sh", "-c", self.command(name)]


@dataclass(frozen=True)
class ConfigFile:
    """One config file a kind's CLI reads by itself, outside what jigs writes for it.

    ``path`` is relative (POSIX) to ``root``: the step's worktree or the HOME the agent runs
    with. ``format`` names the file's language (``"json"``, ``"toml"``, ``"typescript"``, ...).
    ``hostile(planted)`` returns the text of a hostile version: hooks, helper commands, env
    injection, endpoint redirection and MCP servers built from :class:`Planted`, so that any
    of them taking effect leaves a marker, reaches the planted endpoint or shows up in the
    agent's environment. ``handling`` says, for people, what jigs does about the file (not
    loaded and why, refused with :class:`~jigs.errors.JitCheckError`, content only). A kind may
    declare one path more than once (say, a version its guard refuses and one it lets through):
    the kit plants each version in its own round.
    """

    path: str
    root: Literal["worktree", "home"]
    format: str
    hostile: Callable[[Planted], str]
    handling: str


def config_files_of(harness: Any) -> Sequence[ConfigFile] | None:
    """The config files ``harness`` declares (its ``config_files()`` method), or None when it
    declares none (the kit then fails: a kind must say, even ``()`` for a CLI reading none)."""
    method = getattr(harness, "config_files", None)
    return None if method is None else method()
