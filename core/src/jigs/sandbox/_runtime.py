"""What an executable needs to run, shown read-only in the sandbox that launches it.

For the executable jigs launches (the CLI, a fake CLI in the tests, a kind's own launcher):
its directory (as named and as resolved), and when it is a script, its ``#!`` interpreter
(``/usr/bin/env NAME`` is looked up on the launch's ``PATH``). An interpreter that is a Python
gets its installation (``<prefix>/lib/pythonX.Y``) and, when it runs from a virtual
environment, that environment; anything else must be exposed by the kind
(:meth:`~jigs.plugin.HarnessContext.expose`).

A declared stdio MCP server is chosen by the operator like the CLI is, and the CLI starts it
inside the sandbox: its command gets the same (:func:`stdio_server_paths`), and so does each of
its arguments that is an absolute path to an existing file (``python /opt/mcp/server.py``: the
script). Only the file itself: a directory named in its arguments (data it serves, a package
beside the script) is not shown, since that could be anything of the machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from shutil import which

__all__ = ["runtime_paths", "stdio_server_paths"]

_MAX_SHEBANG = 256


def _interpreter(path: str, env: Mapping[str, str]) -> str | None:
    """The interpreter a ``#!`` script names, or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_MAX_SHEBANG)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env" and len(words) > 1:
        named = [w for w in words[1:] if not w.startswith("-")]
        return which(named[0], path=env.get("PATH", os.defpath)) if named else None
    return words[0]


def _python_paths(path: str) -> list[str]:
    """A Python interpreter's installation and virtual environment, if ``path`` is one."""
    if not os.path.basename(path).startswith("python"):
        return []
    found = []
    for candidate in (path, os.path.realpath(path)):
        root = os.path.dirname(os.path.dirname(os.path.abspath(candidate)))
        if os.path.exists(os.path.join(root, "pyvenv.cfg")) or os.path.isdir(
            os.path.join(root, "lib")
        ):
            found.append(root)
    return found


def runtime_paths(executable: str, env: Mapping[str, str]) -> list[str]:
    """The directories ``executable`` (an absolute path) needs to run (see the module)."""
    paths: list[str] = []
    seen: set[str] = set()
    todo = [executable]
    while todo and len(seen) < 4:  # a script's interpreter may be a script (bounded)
        current = todo.pop()
        if current in seen or not os.path.exists(current):
            continue
        seen.add(current)
        paths += [
            os.path.dirname(os.path.abspath(current)),
            os.path.dirname(os.path.realpath(current)),
        ]
        paths += _python_paths(current)
        interpreter = _interpreter(current, env)
        if interpreter:
            todo.append(interpreter)
    return list(dict.fromkeys(paths))


def stdio_server_paths(
    servers: Iterable[tuple[str, Sequence[str]]], env: Mapping[str, str]
) -> list[str]:
    """What the stdio MCP servers ``(command, args)`` need to run in the sandbox (see the
    module): each command's :func:`runtime_paths` (a bare name is looked up on ``env``'s
    ``PATH``), and each argument that is an absolute path to a file, with *its* runtime when it
    is a ``#!`` script."""
    paths: list[str] = []
    for command, args in servers:
        found = command if os.sep in command else which(command, path=env.get("PATH", os.defpath))
        if found and os.path.isabs(found):
            paths += runtime_paths(found, env)
        for arg in args:
            if os.path.isabs(arg) and os.path.isfile(arg):
                paths.append(arg)
                interpreter = _interpreter(arg, env)
                if interpreter:
                    paths += runtime_paths(interpreter, env)
    return list(dict.fromkeys(paths))
