"""Per-kind set-up shared by the whole-process benchmarks: the jigs descriptor settings and the
raw CLI run the way people run it, both pointed at one loopback model server.

Used by ``bench_cold.py`` and ``bench_load.py`` (run as scripts, so this module is
importable by its name). The raw runs reuse one home across runs (``claude -p`` with a reused
``HOME``, ``codex exec`` with a reused ``CODEX_HOME`` holding the same curated ``config.toml``
jigs writes, ``pi -p`` with a reused agent dir holding the same ``models.json``, ``opencode run``
with a reused ``HOME`` whose ``~/.config/opencode/opencode.json`` is the config jigs writes), the
way a person runs the CLI again and again.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KEY_ENV = "JIGS_BENCH_KEY"
KEY = "sk-bench"
ANSWER = "benchmark answer"
PROMPT = "say something"
KINDS = ("claude", "codex", "pi", "opencode")


@dataclass
class Kind:
    """What a benchmark needs to run one step of ``kind`` three ways."""

    kind: str
    #: ``harnesses.<kind>(**settings)`` builds the jigs descriptor.
    settings: dict[str, Any]
    #: ``agents_env`` for ``run_agent`` / ``create_agent_runner``.
    agents_env: list[str]
    #: The raw CLI's argv; the prompt is its last element.
    raw_argv: list[str]
    #: The raw CLI's whole environment (and the SDK's: the same variables).
    raw_env: dict[str, str]
    #: The environment of a fresh jigs process (no CLI-specific variables).
    jigs_env: dict[str, str]
    #: The environment of a fresh SDK process (``{}``: the kind has no SDK).
    sdk_env: dict[str, str]
    #: The executable jigs resolves (the SDKs are pointed at the same one).
    exe: str
    #: What the raw CLI's stdout holds when its turn answered (the scripted answer at least).
    raw_expect: list[str] = field(default_factory=lambda: [ANSWER])
    cleanup: list[Path] = field(default_factory=list)

    def raw_ok(self, out: bytes) -> bool:
        """Whether the raw CLI's stdout shows a finished turn with the scripted answer."""
        return all(marker.encode() in out for marker in self.raw_expect)

    def remove(self) -> None:
        for path in self.cleanup:
            shutil.rmtree(path, ignore_errors=True)


def base_env(home: Path) -> dict[str, str]:
    """The environment every side starts from: this one, a reused scratch ``HOME``, the key,
    and ``IS_SANDBOX=1`` when running as root (Claude Code refuses root without it)."""
    env = dict(os.environ)
    env["HOME"] = str(home)
    env[KEY_ENV] = KEY
    if os.geteuid() == 0:
        env["IS_SANDBOX"] = "1"
    return env


def prepare_environ() -> None:
    """Point this process at a scratch data dir while keeping the CLIs ``jigs install`` put in
    the real one (call before anything resolves a CLI). The scratch dir is an XDG data home,
    not ``JIGS_DATA_DIR``: a step then finds its data dir the way a user's step does."""
    from jigs.executables import installed_dir
    from jigs_harness_pi import resolve_pi

    os.environ.setdefault("JIGS_PI_EXECUTABLE", str(resolve_pi(os.environ).path))
    os.environ.setdefault("JIGS_CLI_DIR", str(installed_dir("_").parent))
    os.environ.pop("JIGS_DATA_DIR", None)
    data = tempfile.mkdtemp(prefix="jigs-bench-data-")
    # removed at exit: left in the temp dir, each run's would lengthen the private dirs' sweep
    atexit.register(shutil.rmtree, data, ignore_errors=True)
    os.environ["XDG_DATA_HOME"] = data
    os.environ[KEY_ENV] = KEY
    if os.geteuid() == 0:
        os.environ["IS_SANDBOX"] = "1"


def setup(kind: str, server: Any, root: Path) -> Kind:
    """The jigs settings and the raw run for ``kind`` against ``server`` (a
    :class:`jigs_testing.ModelServer`); scratch files go under ``root``."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = base_env(home)
    if kind == "claude":
        return _claude(server, env)
    if kind == "codex":
        return _codex(server, env, root)
    if kind == "pi":
        return _pi(server, env)
    if kind == "opencode":
        return _opencode(server, env)
    raise SystemExit(f"unknown kind {kind!r}: choose from {', '.join(KINDS)}")


def _claude(server: Any, env: dict[str, str]) -> Kind:
    from jigs_harness_claude import resolve_executable

    exe = str(resolve_executable(os.environ).path)
    raw_env = env | {
        "ANTHROPIC_BASE_URL": server.anthropic_base_url,
        "ANTHROPIC_API_KEY": KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    return Kind(
        kind="claude",
        settings={"base_url": server.anthropic_base_url, "api_key_env": KEY_ENV},
        agents_env=["IS_SANDBOX"],
        raw_argv=[exe, "-p", PROMPT],
        raw_env=raw_env,
        jigs_env=env,
        sdk_env=raw_env,
        exe=exe,
    )


def _codex(server: Any, env: dict[str, str], root: Path) -> Kind:
    from jigs import harnesses
    from jigs_harness_codex import CodexHarness
    from jigs_harness_codex._home import render_config

    exe = str(CodexHarness().resolve_executable(os.environ).path)
    settings = {
        "model": "bench-model",
        "base_url": server.openai_base_url,
        "api_key_env": KEY_ENV,
        "max_retries": 0,
    }
    config, _ = render_config(harnesses.codex(**settings), os.environ)  # type: ignore[arg-type]
    homes = {}
    for name in ("raw", "sdk"):
        path = root / f"codex-home-{name}"
        path.mkdir(exist_ok=True)
        (path / "config.toml").write_text(config)
        homes[name] = path
    return Kind(
        kind="codex",
        settings=settings,
        agents_env=[],
        raw_argv=[exe, "exec", "--skip-git-repo-check", "--json", PROMPT],
        raw_env=env | {"CODEX_HOME": str(homes["raw"])},
        jigs_env=env,
        sdk_env=env | {"CODEX_HOME": str(homes["sdk"])},
        exe=exe,
        raw_expect=[ANSWER, '"turn.completed"'],
        cleanup=list(homes.values()),
    )


def _pi(server: Any, env: dict[str, str]) -> Kind:
    from jigs import harnesses
    from jigs_harness_pi import resolve_pi
    from jigs_harness_pi._home import PiHome, model_flag

    pi = resolve_pi(os.environ)
    settings = {
        "model": {
            "type": "openai-compatible",
            "name": "local",
            "base_url": server.openai_base_url,
            "model": "fake-model",
            "api_key_env": KEY_ENV,
        }
    }
    descriptor = harnesses.pi(**settings)
    agent_dir = PiHome(descriptor)  # type: ignore[arg-type]
    raw_env = env | {
        "PI_CODING_AGENT_DIR": str(agent_dir.path),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }
    return Kind(
        kind="pi",
        settings=settings,
        agents_env=[],
        raw_argv=[*pi.argv, "-p", "--model", model_flag(descriptor), "--", PROMPT],  # type: ignore[arg-type]
        raw_env=raw_env,
        jigs_env=env,
        sdk_env={},
        exe=str(pi.path),
        cleanup=[agent_dir.path],
    )


def _opencode(server: Any, env: dict[str, str]) -> Kind:
    """``opencode run`` with a reused ``HOME`` (its config, data, cache and state dirs where
    opencode puts them by default), the config in ``~/.config/opencode/opencode.json`` being the
    one jigs writes for a step (the provider at the model server, the key as an ``{env:...}``
    reference) and the same ``OPENCODE_*`` variables: without them opencode also fetches the
    models.dev catalogue, watches files and so on, which is not jigs' cost to measure. The
    argv is jigs' (``--format json --auto --title --thinking``), the prompt an argument."""
    from jigs import harnesses
    from jigs_harness_opencode._config import _FLAGS, config
    from jigs_harness_opencode._executable import resolve_opencode

    exe = str(resolve_opencode(os.environ).path)
    settings = {"model": "bench-model", "base_url": server.openai_base_url, "api_key_env": KEY_ENV}
    data = config(
        harnesses.opencode(**settings),  # type: ignore[arg-type]
        server.openai_base_url,
        f"{{env:{KEY_ENV}}}",
        [],
    )
    home = Path(env["HOME"])
    (home / ".config" / "opencode").mkdir(parents=True, exist_ok=True)
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(data, indent=1))
    # opencode's dirs under the reused HOME (prepare_environ pointed XDG_DATA_HOME at jigs')
    raw_env = {k: v for k, v in env.items() if not k.startswith("XDG_")} | _FLAGS
    argv = [exe, "run", "--format", "json", "--auto", "--title", "bench", "--thinking", PROMPT]
    return Kind(
        kind="opencode",
        settings=settings,
        agents_env=[],
        raw_argv=argv,
        raw_env=raw_env,
        jigs_env=env,
        sdk_env={},
        exe=exe,
        raw_expect=[ANSWER, '"step_finish"'],
    )
