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
script written here removes the key variables and then does exactly that, with the shell Claude
Code chose (``$SHELL`` when it is bash or zsh, else ``/bin/sh``). It holds no secret.

Limits, stated plainly: the key is still in Claude Code's own process environment, so a
command that reads ``/proc/<claude pid>/environ`` (same user) can still find it; this hides the
key from ``env``, ``printenv``, ``$ANTHROPIC_API_KEY`` and from MCP servers, not from a
determined process of the same user. A stdio MCP server cannot be given a variable named
``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN`` through its declaration while the prefix is
active (it is removed like the inherited one).
"""

from __future__ import annotations

import os
from pathlib import Path

from jigs.errors import JigsError

__all__ = ["HIDDEN", "PREFIX_VAR", "write_shell_prefix"]

#: The variable Claude Code reads the prefix from.
PREFIX_VAR = "CLAUDE_CODE_SHELL_PREFIX"
#: The variables that carry the model key to Claude Code and are removed from its children.
HIDDEN = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")

_SCRIPT = f"""#!/bin/sh
# Written by jigs: Claude Code runs every Bash command, hook and stdio MCP server through this
# script ({PREFIX_VAR}); the model key stays with Claude Code and out of their environment.
unset {" ".join(HIDDEN)}
case "${{SHELL-}}" in
*/bash | */zsh) exec "$SHELL" -c "$1" ;;
esac
exec /bin/sh -c "$1"
"""


def write_shell_prefix(directory: Path) -> Path:
    """Write the prefix script into ``directory`` (a private dir the caller removes) and return
    its path. Raises :class:`JigsError` when the path contains ``" -"``, which Claude Code would
    split (move ``TMPDIR`` to a path without it)."""
    path = directory / "shell-prefix"
    if " -" in str(path):
        raise JigsError(
            f"the private directory {directory} contains ' -', which Claude Code splits in "
            f"{PREFIX_VAR}; set TMPDIR to a path without it"
        )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(_SCRIPT)
    return path
