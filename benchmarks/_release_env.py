"""Where a whole-process benchmark runs jigs' side: the release venv (as a user installs jigs) or
the workspace venv (every dev tool installed).

``release``: the release wheels, built once by ``.ci/build-release`` into
``cache_dir()/release/<hash of the sources>/dist`` (a second run with unchanged sources reuses
them), installed with ``uv venv`` + ``uv pip install --compile-bytecode`` into ``.../venv``:
jigs-core and the three kind wheels only (no jigs-testing, no dev tools), their dependencies
constrained to the versions the workspace holds (so the CLIs come from the same pinned wheels).
Its Python children run with the venv's own compiled bytecode (no ``PYTHONPYCACHEPREFIX``).

``workspace``: today's behaviour, ``sys.executable`` with the bytecode caches of ``_pycache.py``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from _pycache import cache_dir, with_bytecode_cache

ROOT = Path(__file__).resolve().parent.parent
ENVS = ("release", "workspace")
#: The distributions the release venv gets (their dependencies come along).
RELEASE_WHEELS = ("jigs-core", "jigs-harness-claude", "jigs-harness-codex", "jigs-harness-pi")
#: The kinds those wheels bring.
RELEASE_KINDS = ("claude", "codex", "pi")
#: What the sources hash covers: everything the four wheels are built from.
SOURCES = ("core", "harnesses", ".ci/build-release", "pyproject.toml", "LICENSE")


def uv_command() -> list[str]:
    """The uv running us (``uv run`` sets ``UV``), else uv on PATH, else ``python3 -m uv``."""
    found = os.environ.get("UV") or shutil.which("uv")
    return [found] if found else ["python3", "-m", "uv"]


@dataclass(frozen=True)
class PythonEnv:
    """An interpreter for jigs' side and how to build a child's environment for it."""

    name: str
    python: str
    #: Where it came from, for the benchmark's output.
    note: str

    def child_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for a child of ``python``: the release venv reads its own compiled bytecode
        (and writes the stdlib's like a user's machine); the workspace gets ``_pycache.py``'s."""
        if self.name == "workspace":
            return with_bytecode_cache(env)
        drop = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "VIRTUAL_ENV", "PYTHONPATH")
        out = {k: v for k, v in env.items() if k not in drop}
        out["PATH"] = f"{Path(self.python).parent}{os.pathsep}{out.get('PATH', '')}"
        return out

    def distributions(self) -> list[str]:
        """The names of the distributions installed in this interpreter's environment."""
        code = (
            "import importlib.metadata as m; "
            "print('\\n'.join(sorted({d.metadata['Name'] for d in m.distributions()})))"
        )
        out = subprocess.run(
            [self.python, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env=self.child_env(os.environ),
        )
        return out.stdout.split()

    def run(self, code: str) -> str:
        """stdout of ``python -c code`` in this environment."""
        return subprocess.run(
            [self.python, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env=self.child_env(os.environ),
        ).stdout.strip()


def sources_hash() -> str:
    """sha256 (16 hex digits) over the paths and contents of the tracked files under SOURCES."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", *SOURCES], cwd=ROOT, check=True, capture_output=True
    ).stdout.split(b"\0")
    digest = hashlib.sha256()
    for name in sorted(n for n in listed if n):
        path = ROOT / name.decode()
        digest.update(name + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def workspace_env() -> PythonEnv:
    return PythonEnv("workspace", sys.executable, f"workspace venv {sys.prefix}")


def release_env() -> PythonEnv:
    """The release venv (built on first use; raises SystemExit with the tool's output when a
    build or install fails)."""
    base = cache_dir() / "release" / sources_hash()
    dist, venv = base / "dist", base / "venv"
    python = venv / "bin" / "python"
    marker = base / ".installed"
    if marker.exists() and python.exists():
        return PythonEnv("release", str(python), f"release venv {venv} (reused)")
    uv = uv_command()
    shutil.rmtree(venv, ignore_errors=True)
    wheels = []
    for name in RELEASE_WHEELS:
        found = sorted(dist.glob(f"{name.replace('-', '_')}-*-py3-none-any.whl"))
        wheels.append(found[-1] if found else None)
    if None in wheels:
        _check([sys.executable, str(ROOT / ".ci" / "build-release"), str(dist)], "build")
        wheels = [
            sorted(dist.glob(f"{name.replace('-', '_')}-*-py3-none-any.whl"))[-1]
            for name in RELEASE_WHEELS
        ]
    # the dependencies at the workspace's versions (the same pinned CLIs, the same pydantic)
    constraints = base / "constraints.txt"
    constraints.write_text(
        "".join(
            f"{d.metadata['Name']}=={d.version}\n"
            for d in importlib.metadata.distributions()
            if not d.metadata["Name"].startswith("jigs")
        )
    )
    _check([*uv, "venv", "-q", "--python", sys.executable, str(venv)], "venv")
    install = [*uv, "pip", "install", "-q", "--compile-bytecode", "--python", str(python)]
    install += ["--constraint", str(constraints), *map(str, wheels)]
    try:
        _check([*install, "--offline"], "install")
    except SystemExit:
        _check(install, "install")  # a dependency the uv cache does not hold
    marker.write_text("\n".join(map(str, wheels)))
    return PythonEnv("release", str(python), f"release venv {venv} (built now)")


def _check(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"release venv: {what} failed (exit {result.returncode}): {argv}\n"
            f"{result.stdout[-1500:]}{result.stderr[-1500:]}"
        )


def jigs_env(name: str) -> PythonEnv:
    if name not in ENVS:
        raise SystemExit(f"unknown env {name!r}: choose from {', '.join(ENVS)}")
    return release_env() if name == "release" else workspace_env()


def describe_env(env: PythonEnv) -> list[str]:
    """Lines for a benchmark's output: the interpreter, and for the release venv every
    distribution it holds (names only)."""
    lines = [f"jigs side runs in: {env.note}, python {env.python}"]
    if env.name == "release":
        names = env.distributions()
        lines.append(f"  release venv distributions ({len(names)}): {' '.join(names)}")
    return lines


#: Prints where the release venv's jigs finds each CLI (and whether it is byte-identical to the
#: one the workspace's jigs resolves).
CLI_PATHS = """
import hashlib, os
from jigs_harness_claude import resolve_executable
from jigs_harness_codex import CodexHarness
from jigs_harness_pi import resolve_pi
for kind, path in (
    ("claude", resolve_executable(os.environ).path),
    ("codex", CodexHarness().resolve_executable(os.environ).path),
    ("pi", resolve_pi(os.environ).path),
):
    print(kind, path, hashlib.sha256(open(path, "rb").read()).hexdigest())
"""


def cli_paths(env: PythonEnv) -> dict[str, tuple[str, str]]:
    """kind -> (path, sha256) of the CLI jigs resolves in ``env``."""
    out = {}
    for line in env.run(CLI_PATHS).splitlines():
        kind, path, digest = line.split()
        out[kind] = (path, digest)
    return out


def compare_clis(env: PythonEnv) -> list[str]:
    """Lines saying, per kind, which CLI each environment's jigs resolves and whether the two
    are the same bytes (raises SystemExit when they differ: the sides would not be comparable)."""
    if env.name == "workspace":
        return []
    ours, theirs = cli_paths(workspace_env()), cli_paths(env)
    lines = []
    for kind, (path, digest) in theirs.items():
        ws_path, ws_digest = ours[kind]
        same = "same bytes" if digest == ws_digest else "DIFFERENT BYTES"
        lines.append(f"  {kind} CLI: release {path}; workspace {ws_path}: {same}")
        if digest != ws_digest:
            raise SystemExit("\n".join(lines) + f"\nthe {kind} CLIs differ: not comparable")
    return lines
