"""The shell prefix that keeps the model key out of the agent's commands.

Claude Code needs the endpoint key in its own environment (``ANTHROPIC_API_KEY`` or
``ANTHROPIC_AUTH_TOKEN``), and every process it starts inherits that environment. Claude Code
2.1.x runs each Bash tool command (foreground and background), each hook and each stdio MCP
server through ``$CLAUDE_CODE_SHELL_PREFIX`` when it is set:

- Bash tool and hooks: the shell runs ``'<prefix>' '<the whole command string>'``;
- stdio MCP servers: the prefix is executed directly with one argument, the server's command
  line quoted for a POSIX shell.

So the prefix must be a single executable path (an argument in it would break the MCP form, and
a path containing ``" -"`` is split by Claude Code) that runs its one argument with a shell. The
script written here removes the key variables (and ``BASH_ENV``/``ENV``, which make a
non-interactive shell read a file) and then runs its argument with ``bash --noprofile --norc``
(``/bin/sh`` when there is no bash). It holds no secret.

**No rc or profile file is ever read.** Plain ``bash -c`` sources ``~/.bashrc`` when its stdin
is a socket (Claude Code's is), and Claude Code itself starts a *login* shell once per session
(``<shell> -c -l <script>``, not through the prefix) that sources ``~/.bashrc`` and the profile
files to build a "shell snapshot" that every later command sources. A slow or hostile
``~/.bashrc`` then delays each session by Claude Code's snapshot timeout (10 s measured; 60+ s
before the prefix ran bash with ``--norc``) and its exports reach the agent's commands. So jigs
also points ``CLAUDE_CODE_SHELL`` (:data:`SHELL_VAR`) at a second script, :data:`SHELL_NAME`
next to the prefix (Claude Code only accepts a path containing ``bash``), which refuses the
snapshot run (Claude Code then runs commands without a snapshot) and otherwise runs bash with
``--noprofile --norc``. Measured with Claude Code 2.1.332 and a ``~/.bashrc`` that exports a
canary and sleeps 60 s: no canary in commands or MCP servers, no delay.

Limits, stated plainly: the key is still in Claude Code's own process environment, so a
command that reads ``/proc/<claude pid>/environ`` (same user) can still find it; this hides the
key from ``env``, ``printenv``, ``$ANTHROPIC_API_KEY`` and from MCP servers, not from a
determined process of the same user. A stdio MCP server cannot be given a variable named
``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN`` through its declaration while the prefix is
active (it is removed like the inherited one).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from jigs.errors import InvalidInputError
from jigs.executables import which

__all__ = ["HIDDEN", "PREFIX_VAR", "SHELL_NAME", "SHELL_VAR", "shell_env", "write_shell_prefix"]

#: The variable Claude Code reads the prefix from.
PREFIX_VAR = "CLAUDE_CODE_SHELL_PREFIX"
#: The variable Claude Code reads its shell from (a path containing ``bash`` or ``zsh``).
SHELL_VAR = "CLAUDE_CODE_SHELL"
#: The file name of the shell script, written next to the prefix.
SHELL_NAME = "bash"
#: The variables that carry the model key to Claude Code and are removed from its children.
HIDDEN = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
#: Variables that make a non-interactive shell read a file; removed too.
_STARTUP_FILES = ("BASH_ENV", "ENV")
_PREFIX = "shell-prefix"


def _prefix_script(bash: str | None) -> str:
    run = f"exec {shlex.quote(bash)} --noprofile --norc -c" if bash else "exec /bin/sh -c"
    return f"""#!/bin/sh
# Written by jigs: Claude Code runs every Bash command, hook and stdio MCP server through this
# script ({PREFIX_VAR}); the model key stays with Claude Code and out of their environment, and
# no rc or profile file is read.
unset {" ".join((*HIDDEN, *_STARTUP_FILES))}
{run} "$1"
"""


def _shell_script(bash: str) -> str:
    return f"""#!/bin/sh
# Written by jigs: Claude Code's shell ({SHELL_VAR}). Claude Code's "shell snapshot" runs a login
# shell that sources ~/.bashrc and the profile files; it is refused (commands then run without
# a snapshot). Everything else runs in bash without rc or profile files.
unset {" ".join(_STARTUP_FILES)}
if [ "${{1-}}" = "-c" ] && [ "${{2-}}" = "-l" ]; then
  case "${{3-}}" in SNAPSHOT_FILE=*) exit 1 ;; esac
fi
exec {shlex.quote(bash)} --noprofile --norc "$@"
"""


def _find_bash(env: Mapping[str, str] | None) -> str | None:
    path = (env if env is not None else os.environ).get("PATH")

    found = which("bash", path=path) or ("/bin/bash" if os.access("/bin/bash", os.X_OK) else None)
    return str(Path(found).resolve()) if found else None


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def write_shell_prefix(directory: Path, env: Mapping[str, str] | None = None) -> Path:
    """Write the prefix script (and, when bash is found on ``env``'s ``PATH``, the shell script
    :data:`SHELL_NAME`) into ``directory`` (a private dir the caller removes) and return the
    prefix's path; :func:`shell_env` gives the variables that point Claude Code at them. Raises
    :class:`~jigs.errors.InvalidInputError` when the path contains ``" -"``, which Claude Code
    would split (move ``TMPDIR`` to a path without it)."""
    path = directory / _PREFIX
    if " -" in str(path):
        raise InvalidInputError(
            f"the private directory {directory} contains ' -', which Claude Code splits in "
            f"{PREFIX_VAR}; set TMPDIR to a path without it",
            argument="TMPDIR",
        )
    bash = _find_bash(env)
    _write(path, _prefix_script(bash))
    if bash:
        _write(directory / SHELL_NAME, _shell_script(bash))
    return path


def shell_env(prefix: Path) -> dict[str, str]:
    """The variables that make Claude Code use the scripts :func:`write_shell_prefix` wrote:
    :data:`PREFIX_VAR`, and :data:`SHELL_VAR` when the shell script exists."""
    env = {PREFIX_VAR: str(prefix)}
    shell = prefix.parent / SHELL_NAME
    if shell.is_file():
        env[SHELL_VAR] = str(shell)
    return env
