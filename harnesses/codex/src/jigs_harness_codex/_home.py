"""The private ``CODEX_HOME`` every invocation gets, and the run's durable session store.

Layout under the run's state dir (``ctx.state_dir``)::

    sessions/                       durable rollouts: a later step of the same run resumes from here
    homes/invocation-XXXXXX/        this invocation's CODEX_HOME (removed on close)
        config.toml                 curated: no update check, analytics and plugins off, no
                                    login shell for commands (and no shell snapshot, which
                                    would run one), bounded retries, the step's MCP
                                    servers only (zero otherwise), the descriptor's model
                                    provider (a key *name*, never its value)
        auth.json -> <operator's ~/.codex/auth.json>   (a symlink: refresh tokens are single-use)
        sessions/                   where Codex writes this step's rollout: a directory
                                    Codex creates itself (when it exists at start, as a
                                    symlink into the store or even empty, Codex reconciles it
                                    with its state database and every thread start costs
                                    10-20 ms more); the resumed thread's rollout is
                                    hard-linked in, and at close every rollout moves to the
                                    store (one rename each, same filesystem) before the home
                                    is removed. While the step runs its session is read here
                                    (:func:`live_sessions_dirs`).

Nothing here holds a lasting secret. With a key the provider's ``base_url`` is the step's credential
proxy (its URL carries the step's token, worthless once the step closes) and ``env_key`` names a
variable that holds only the proxy's placeholder: the real key never leaves the worker. MCP
credentials travel in the app server's environment only, and ``shell_environment_policy.exclude``
keeps them (and the placeholder) from the agent's commands. Without an endpoint, ``auth.json`` is
the operator's login, linked in: the agent can read it (same user); it is not proxied.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from jigs.errors import DescriptorError
from jigs.mcp import McpHttpServer, McpStdioServer
from jigs.plugin.tools import copy_skills, make_dir, remove_tree

from jigs_harness_codex._descriptor import DEFAULT_OPENAI_BASE_URL, CodexDescriptor
from jigs_harness_codex._seed import claim_spare, copy_seed

__all__ = [
    "MCP_STARTUP_TIMEOUT",
    "PROVIDER_ID",
    "CodexHome",
    "build_home",
    "link_rollout",
    "live_sessions_dirs",
    "mcp_startup_timeout",
    "operator_auth_file",
    "render_config",
    "rollout_for",
    "save_rollouts",
    "sessions_dir",
]

#: The ``[model_providers.<id>]`` jigs writes when the descriptor names an endpoint.
PROVIDER_ID = "jigs"
#: The most seconds Codex may take to start one step server and list its tools (the probe's
#: start and list phases take 10 s each at most); capped further at half the descriptor's
#: ``startup_timeout`` so Codex's own, precise error arrives before jigs gives up on the thread.
MCP_STARTUP_TIMEOUT = 20.0
_THREAD_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z-]{7,80}$")
_FIRST_LINE_LIMIT = 64 * 1024


@dataclass(frozen=True)
class CodexHome:
    """A built home: its path and what the app server's environment must add."""

    path: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def remove(self) -> None:
        """Delete the home (never follows the symlinks into the login or the session store)."""
        remove_tree(self.path)


def sessions_dir(state_dir: Path) -> Path:
    """The run's durable rollout store."""
    return state_dir / "sessions"


def live_sessions_dirs(state_dir: Path) -> list[Path]:
    """The ``sessions`` directories of the run's open homes (a running step's rollout)."""
    return sorted((state_dir / "homes").glob("invocation-*/sessions"))


def link_rollout(store: Path, home: Path, thread_id: str) -> None:
    """Make the stored rollout of ``thread_id`` visible in ``home`` (the thread a step resumes
    by forking it): a hard link at the same relative path, a copy where linking fails."""
    source = rollout_for(store, thread_id)
    if source is None:
        return  # the fork fails with Codex's own error; verify_resume checked the store
    target = home / "sessions" / source.relative_to(store)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:
        shutil.copy2(source, target)


def save_rollouts(home: Path, store: Path) -> int:
    """Move every rollout of ``home`` into the run's ``store`` at the same relative path (the
    app server has exited); returns how many. A resumed thread's hard link lands on its own
    stored file."""
    moved = 0
    root = home / "sessions"
    if root.is_symlink() or not root.is_dir():
        return 0
    for path in sorted(root.rglob("rollout-*.jsonl")):
        if path.is_symlink() or not path.is_file():
            continue
        target = store / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
        moved += 1
    return moved


def operator_auth_file(env: Mapping[str, str]) -> Path:
    """The operator's Codex login: ``$CODEX_HOME/auth.json`` of the host, else
    ``~/.codex/auth.json``."""
    host_home = os.environ.get("CODEX_HOME")
    if host_home:
        return Path(host_home) / "auth.json"
    home = env.get("HOME") or os.environ.get("HOME") or str(Path.home())
    return Path(home) / ".codex" / "auth.json"


def _toml_str(value: str) -> str:
    # a JSON string is a valid TOML basic string (same escapes, no raw control characters)
    return json.dumps(value, ensure_ascii=False)


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else _toml_str(key)


def mcp_startup_timeout(descriptor: CodexDescriptor) -> float:
    """Seconds Codex may take to start one of the step's servers (``startup_timeout_sec``)."""
    return min(MCP_STARTUP_TIMEOUT, descriptor.startup_timeout / 2)


def _http_server_lines(server: McpHttpServer, secret_names: set[str]) -> list[str]:
    """An HTTP server's keys; the names of the credentials it reads join ``secret_names``."""
    lines = [f"url = {_toml_str(server.url)}"]
    if server.bearer_token_env:
        lines.append(f"bearer_token_env_var = {_toml_str(server.bearer_token_env)}")
        secret_names.add(server.bearer_token_env)
    if server.headers:
        pairs = ", ".join(
            f"{_toml_str(h)} = {_toml_str(src)}" for h, src in sorted(server.headers.items())
        )
        lines.append(f"env_http_headers = {{ {pairs} }}")
        secret_names.update(server.headers.values())
    return lines


def _mcp_tables(
    descriptor: CodexDescriptor, env: Mapping[str, str], *, gated: bool = False
) -> tuple[list[str], dict[str, str], set[str]]:
    """The ``[mcp_servers.*]`` tables, the env the app server must add for renamed
    credentials, and every credential name (kept from the agent's shell).

    Every server is ``required``: Codex then fails ``thread/start`` when one does not start
    within ``startup_timeout_sec`` (an optional one would be dropped silently after about a
    second, and the model would run without its tools)."""
    others = {
        name: frozenset().union(
            *(s.env_names() for n, s in descriptor.mcp_servers.items() if n != name)
        )
        for name in descriptor.mcp_servers
    }
    startup = f"startup_timeout_sec = {float(mcp_startup_timeout(descriptor))!r}"
    lines: list[str] = []
    extra: dict[str, str] = {}
    secret_names: set[str] = set()
    for name, server in sorted(descriptor.mcp_servers.items()):
        lines += ["", f"[mcp_servers.{_toml_key(name)}]"]
        if isinstance(server, McpStdioServer):
            lines.append(f"command = {_toml_str(server.command)}")
            lines.append(f"args = {_toml_list(server.args)}")
            # Codex gives a stdio server only a few variables of its own (HOME, PATH, ...) plus
            # env_vars: forward the step's environment, as the probe had it, except the model
            # key, CODEX_HOME and the credentials other servers declared
            forwarded = (
                set(env)
                - {descriptor.api_key_env, "CODEX_HOME"}
                - (others[name] - server.env_names())
            )
            for child, source in server.env.items():
                forwarded.add(child)
                secret_names.update((child, source))
                if child != source and source in env:
                    # a renamed credential rides in the app server's env, never on disk
                    extra[child] = env[source]
            if forwarded:
                lines.append(f"env_vars = {_toml_list(sorted(n for n in forwarded if n))}")
        elif isinstance(server, McpHttpServer):
            lines += _http_server_lines(server, secret_names)
        if server.disabled_tools:
            lines.append(f"disabled_tools = {_toml_list(server.disabled_tools)}")
        lines += ["required = true", startup]
        # unattended: a declared (and probed) server's tools run without asking (with "prompt"
        # Codex would refuse them under the approval policy "never"); a gated step's turns ask
        # ("untrusted"), and "prompt" makes each tool call one of the questions
        mode = "prompt" if gated else "approve"
        lines.append(f"default_tools_approval_mode = {_toml_str(mode)}")
    return lines, extra, secret_names


def render_config(
    descriptor: CodexDescriptor,
    env: Mapping[str, str],
    *,
    base_url: str | None = None,
    gated: bool = False,
) -> tuple[str, dict[str, str]]:
    """The curated ``config.toml`` text and the env the app server must add.

    ``base_url`` (the step's proxy URL) replaces the descriptor's endpoint as the provider's
    ``base_url``. Top-level keys come first (a key after a ``[table]`` header belongs to that
    table). ``gated``: the step's MCP tools are asked about (its tool gate answers).
    """
    mcp_lines, extra_env, secret_names = _mcp_tables(descriptor, env, gated=gated)
    if descriptor.api_key_env:
        secret_names.add(descriptor.api_key_env)
    lines = [
        "# jigs: an invocation-private CODEX_HOME, removed when the step's runner closes.",
        "# It declares only the step's own mcp_servers (zero when the step declares none):",
        "# the step's list is the agent's whole MCP universe.",
    ]
    if descriptor.model is not None:
        lines.append(f"model = {_toml_str(descriptor.model)}")
    if descriptor.names_endpoint:
        lines.append(f"model_provider = {_toml_str(PROVIDER_ID)}")
    if descriptor.web_search is not None:
        lines.append(f"web_search = {_toml_str(descriptor.web_search)}")
    if descriptor.model_verbosity is not None:
        lines.append(f"model_verbosity = {_toml_str(descriptor.model_verbosity)}")
    lines += [
        "check_for_update_on_startup = false",
        "# commands run as `bash -c`, not `bash -lc`: a login shell would source the operator's",
        "# profile and could export variables the step's environment policy never allowed",
        "allow_login_shell = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "hooks = false",
        "unbounded_connection_retries = false",
        "# no shell snapshot: Codex would run the operator's login shell (`bash -lc`, sourcing",
        "# their profile) at every thread start to capture its environment for the agent's",
        "# commands, the very profile allow_login_shell keeps out",
        "shell_snapshot = false",
        "",
        "[shell_environment_policy]",
        f"exclude = {_toml_list(sorted(secret_names))}",
    ]
    if descriptor.names_endpoint:
        lines += _provider_table(descriptor, base_url)
    lines += mcp_lines
    return "\n".join(lines) + "\n", extra_env


def _provider_table(descriptor: CodexDescriptor, base_url: str | None) -> list[str]:
    """jigs' ``[model_providers.*]`` table: the step's endpoint (its proxy when given)."""
    lines = [
        "",
        f"[model_providers.{PROVIDER_ID}]",
        'name = "jigs"',
        f"base_url = {_toml_str(base_url or descriptor.base_url or DEFAULT_OPENAI_BASE_URL)}",
        'wire_api = "responses"',
        f"request_max_retries = {descriptor.max_retries}",
        f"stream_max_retries = {descriptor.max_retries}",
    ]
    if descriptor.api_key_env:
        lines.append(f"env_key = {_toml_str(descriptor.api_key_env)}")
    return lines


def build_home(
    descriptor: CodexDescriptor,
    env: Mapping[str, str],
    state_dir: Path,
    *,
    seed: Path | None = None,
    base_url: str | None = None,
    gated: bool = False,
) -> CodexHome:
    """Create this invocation's home (mode 0700) under ``state_dir``, starting from a copy of
    ``seed`` (see :mod:`jigs_harness_codex._seed`: a spare copied ahead when one is ready) when
    given; ``base_url`` as in :func:`render_config`. Any failure removes it."""
    store = sessions_dir(state_dir)
    store.mkdir(parents=True, exist_ok=True)
    homes = state_dir / "homes"
    homes.mkdir(parents=True, exist_ok=True)
    path = make_dir("invocation-", homes)
    home = CodexHome(path)
    try:
        if seed is not None and not claim_spare(seed, path):
            copy_seed(seed, path)
        text, extra_env = render_config(descriptor, env, base_url=base_url, gated=gated)
        config = path / "config.toml"
        config.write_text(text, encoding="utf-8")
        config.chmod(0o600)
        if descriptor.skills:
            # beside the seed's skills/.system: the step's, and nothing of ~/.codex
            try:
                copy_skills(descriptor.skills, path / "skills")
            except OSError as exc:
                raise DescriptorError(
                    f"a skill of the codex descriptor cannot be read ({exc}); fix the path in "
                    f"skills",
                    kind="codex",
                    key="skills",
                ) from None
        if not descriptor.names_endpoint:
            auth = operator_auth_file(env)
            if auth.is_file():
                (path / "auth.json").symlink_to(auth)
    except BaseException:
        home.remove()
        raise
    return CodexHome(path, extra_env)


def rollout_for(store: Path, thread_id: str) -> Path | None:
    """The rollout file of ``thread_id`` in ``store``: named ``rollout-*-<id>.jsonl`` and opening
    with a ``session_meta`` record of that id. None when there is none (or the id is malformed)."""
    if not _THREAD_ID.fullmatch(thread_id) or not store.is_dir():
        return None
    for candidate in sorted(store.rglob(f"rollout-*-{thread_id}.jsonl")):
        try:
            with candidate.open("rb") as fh:
                first = fh.readline(_FIRST_LINE_LIMIT)
            record = json.loads(first)
        except (OSError, ValueError):
            continue
        payload = record.get("payload") if isinstance(record, dict) else None
        if (
            isinstance(record, dict)
            and record.get("type") == "session_meta"
            and isinstance(payload, dict)
            and payload.get("id") == thread_id
        ):
            return candidate
    return None
