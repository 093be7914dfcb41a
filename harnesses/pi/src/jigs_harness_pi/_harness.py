"""The ``pi`` kind: ``pi --mode json`` (``--mode rpc`` with a tool gate), one process per turn; no
model object (``run_agent``).

The core's turn engine runs each turn (deadlines, limits, errors, structured output, the re-ask);
this module only says how Pi is launched:

- :meth:`PiHarness.prepare` (once per step): resolves the CLI (:mod:`jigs_harness_pi._executable`),
  writes the private ``PI_CODING_AGENT_DIR`` (:mod:`jigs_harness_pi._home`; removed when the step
  closes) with the descriptor's system-prompt files, and the sessions dir under the run's state
  dir;
- :meth:`PiHarness.launch_turn`: the argv (``[node, cli.js]`` for a Node Pi) and env
  (``PI_CODING_AGENT_DIR``, offline, no telemetry). Discovery of extensions, skills, prompt
  templates, themes, context files and project-local ``.pi`` files is off
  (``-ne -ns -np --no-themes -nc -na``); Pi's built-in MCP is off (``--no-mcp``) unless the step
  declares servers: then only ``-e builtin:mcp`` reads the ``mcp.json`` jigs wrote, and disabled
  tools go to ``--exclude-tools``. A fresh turn uses a session id jigs chooses
  (``--session-id``), a resumed one opens the proven session file (``--session``); the decoder
  (:class:`~jigs_harness_pi._stream.PiDecoder`) refuses a stream reporting another id. The
  prompt goes on stdin (Pi reads piped stdin in json mode), so no prompt size hits the
  command-line limit and a prompt starting with ``-`` or ``@`` stays a prompt; Pi trims the
  whitespace around it. A step with a tool gate runs ``--mode rpc`` with jigs' gate extension
  (``-e``), the prompt sent as an RPC command (:mod:`jigs_harness_pi._gate`).

Model key: when the model source names ``api_key_env`` the kind declares a
:class:`~jigs.plugin.ModelRoute` (the source's ``base_url``, or OpenRouter's API; ``x-api-key`` for
an Anthropic-compatible source, bearer otherwise). The core proxies it: ``models.json`` gets the
proxy's URL as ``baseUrl`` and the ``$NAME`` it refers to holds the proxy's placeholder.
"""

from __future__ import annotations

import glob
import json
import os
import re
import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import anyio
from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.descriptors import HarnessDescriptor
from jigs.errors import (
    AgentSessionError,
    CliNotFoundError,
    DescriptorError,
    InvalidInputError,
    PromptError,
)
from jigs.executables import Resolved, parse_version
from jigs.plugin import (
    Harness,
    HarnessContext,
    HarnessTarget,
    ModelRoute,
    TurnLaunch,
    TurnSpec,
    artifacts_under,
    private_file,
)
from jigs.plugin.tools import write_atomic

from jigs_harness_pi._compile_cache import compile_cache
from jigs_harness_pi._descriptor import AnthropicCompatible, OpenAICompatible, PiDescriptor
from jigs_harness_pi._executable import (
    INSTALL_FIX,
    MIN_VERSION,
    PiExecutable,
    install_paths,
    install_pi,
    launchable,
    resolve_pi,
)
from jigs_harness_pi._gate import EXTENSION, GateDriver
from jigs_harness_pi._home import (
    PiHome,
    accept_images,
    model_flag,
    pi_model_call,
    upstream_url,
)
from jigs_harness_pi._mcp import allowed_tools, excluded_tools
from jigs_harness_pi._stream import PiDecoder

if TYPE_CHECKING:
    from jigs_testing import ConfigFile, ModelServer
    from jigs_testing.plan import DemoPlan

__all__ = ["SETTLE_GRACE", "PiHarness"]

#: The dummy key variable ``jigs demo`` sets for the pi kind (its value is not a secret).
DEMO_KEY_ENV = "JIGS_DEMO_PI_KEY"

#: Seconds Pi may take to exit after ``agent_settled`` before jigs stops its group.
SETTLE_GRACE = 3.0
_SESSIONS = "sessions"
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _rehome(path: Path, cwd: Path) -> None:
    """Pi refuses a session whose recorded working directory is missing (a session fetched from
    the store on another machine): point its header at this step's worktree (atomically)."""
    lines = path.read_bytes().split(b"\n", 1)
    try:
        header = json.loads(lines[0])
    except ValueError:
        return
    recorded = header.get("cwd") if isinstance(header, dict) else None
    if not isinstance(recorded, str) or Path(recorded).is_dir():
        return
    header["cwd"] = str(cwd)
    rest = lines[1] if len(lines) > 1 else b""
    write_atomic(path, json.dumps(header, separators=(",", ":")).encode() + b"\n" + rest)


def _session_file(sessions: Path, session_id: str) -> Path | None:
    """Pi names session files ``<timestamp>_<id>.jsonl``; the newest match wins. An id that
    is not a plain token (``/``, glob characters) never matches."""
    if not _SESSION_ID.fullmatch(session_id) or not sessions.is_dir():
        return None
    matches = sorted(sessions.glob(f"*_{glob.escape(session_id)}.jsonl"))
    return matches[-1] if matches else None


def _missing(session_id: str, sessions: Path) -> AgentSessionError:
    return AgentSessionError(
        f"Pi session {session_id} is missing from {sessions}; start without resume",
        kind="pi",
        session_id=session_id,
    )


@dataclass(frozen=True)
class _Prepared:
    """What every turn of a step shares."""

    pi: PiExecutable
    home: Path
    sessions: Path
    #: ``--system-prompt`` / ``--append-system-prompt`` arguments (files in ``home``).
    prompt_args: tuple[str, ...]
    #: The key variable ``models.json`` refers to and the proxy's placeholder it holds.
    key_env: tuple[str, str] | None = None
    #: Node's compile cache for this Pi, read-only in the sandbox (see :mod:`._compile_cache`).
    compile_cache: Path | None = None


class PiHarness(Harness[PiDescriptor]):
    """The Pi coding agent (``@earendil-works/pi-coding-agent`` 1.6+)."""

    kind: ClassVar[str] = "pi"
    contract: ClassVar[str | None] = "2.0"
    display_name: ClassVar[str] = "Pi"
    tool_gate: ClassVar[bool] = True
    descriptor_type: ClassVar[type[HarnessDescriptor]] = PiDescriptor
    has_model: ClassVar[bool] = False
    #: ``@path`` arguments (the core's private copies) with the prompt on stdin.
    takes_images: ClassVar[bool] = True
    structured_output: ClassVar[Literal["native", "prompted"]] = "prompted"
    install_hint: ClassVar[str] = INSTALL_FIX
    sets_env: ClassVar[frozenset[str]] = frozenset(
        {
            "PI_CODING_AGENT_DIR",
            "PI_CODING_AGENT_SESSION_DIR",
            "PI_OFFLINE",
            "PI_SKIP_VERSION_CHECK",
            "PI_TELEMETRY",
            "PI_PACKAGE_DIR",
            "NODE_COMPILE_CACHE",
        }
    )

    # ---------------------------------------------------------------- resolution and checks

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The Pi CLI jigs would run (for ``require_cli`` and ``jigs doctor``)."""
        pi = resolve_pi(env)
        return Resolved(pi.path, pi.source)

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        async def run() -> CheckResult:
            try:
                pi = resolve_pi(env)
            except CliNotFoundError as exc:
                return CheckFailure(reason=str(exc).split(". ", 1)[0], repair=INSTALL_FIX)

            try:
                with anyio.fail_after(20):
                    result = await anyio.run_process(
                        [*pi.argv, "--version"], env=dict(env), check=False
                    )
            except (OSError, TimeoutError) as exc:
                return CheckFailure(reason=f"{pi.path} does not run: {exc}", repair=INSTALL_FIX)
            printed = (result.stdout or b"").decode(errors="replace").strip()
            version = parse_version(printed)
            if result.returncode != 0 or version is None:
                err = (result.stderr or b"").decode(errors="replace").strip()[-300:]
                return CheckFailure(
                    reason=f"{pi.path} --version failed (exit {result.returncode}): {err}",
                    repair=INSTALL_FIX,
                )
            if version < MIN_VERSION:
                return CheckFailure(
                    reason=f"{pi.path} is Pi {printed}; jigs needs "
                    f"{'.'.join(map(str, MIN_VERSION))} or newer",
                    repair=INSTALL_FIX,
                )
            runner = f", on {pi.argv[0]}" if len(pi.argv) > 1 else ""
            return CheckOk(f"{pi.path} ({pi.source}), version {printed}{runner}")

        return [Check("harness.pi-cli", "Pi CLI", run, timeout=25)]

    def model_route(self, descriptor: PiDescriptor) -> ModelRoute | None:
        key = descriptor.model.key_env()
        if key is None:
            return None
        scheme: Literal["x-api-key", "bearer"] = (
            "x-api-key" if isinstance(descriptor.model, AnthropicCompatible) else "bearer"
        )
        return ModelRoute(
            upstream=upstream_url(descriptor),
            key_env=key,
            scheme=scheme,
            model_calls=(pi_model_call(descriptor),),
        )

    def descriptor_checks(
        self, descriptor: PiDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        key = descriptor.model.key_env()
        if key is None:
            return ()

        async def run() -> CheckResult:
            if env.get(key):
                return CheckOk(f"${key} is set")
            return CheckFailure(
                reason=f"the model key variable ${key} (api_key_env) is not set in the step's "
                f"environment",
                repair=f"export {key}=... where the step runs, or name another variable in "
                f"the descriptor's model.api_key_env",
            )

        return [Check("harness.pi-model-key", "Pi model key", run)]

    def tool_free_problem(self, descriptor: PiDescriptor) -> str | None:
        """Pi runs with ``--no-tools`` (built-in and extension tools), ``--no-mcp``, no context
        file, skill or prompt template, and ``--no-session``."""
        return None

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """The session file in the run's state dir (``sessions/<timestamp>_<id>.jsonl``)."""
        pattern = f"*_{glob.escape(session_id)}.jsonl"
        return artifacts_under(ctx.state_dir / _SESSIONS, pattern, names)

    async def verify_resume(self, target: HarnessTarget[PiDescriptor], ctx: HarnessContext) -> None:
        resume = target.resume
        sessions = ctx.state_dir / _SESSIONS
        found = _session_file(sessions, resume.id) if resume is not None else None
        if resume is not None and found is None:
            raise _missing(resume.id, sessions)
        if found is not None:
            _rehome(found, target.cwd)

    async def install(self, env: Mapping[str, str]) -> str:
        return await install_pi(env)

    async def warm(self, env: Mapping[str, str], log: Any) -> str | None:
        """A Node Pi's compile cache (what a sandboxed step shows it read-only), made if
        missing; nothing for a Pi that is not run by Node."""
        pi = resolve_pi(env)
        if len(pi.argv) < 2:
            return None
        cache = await compile_cache(pi, env, log)
        if cache is None:
            return "no compile cache (see the log); a sandboxed step will try again"
        return f"compile cache in place at {cache}"

    def config_files(self) -> Sequence[ConfigFile]:
        """What Pi would read from the worktree and HOME (see :mod:`._config_files`)."""
        from jigs_harness_pi._config_files import CONFIG_FILES  # the kit's types (jigs_testing)

        return CONFIG_FILES

    def demo_plan(self, server: ModelServer) -> DemoPlan | None:
        """Pi against the local server's Chat Completions API; files are written with Pi's
        own ``write`` tool."""
        # jigs-testing comes with the kit and `jigs demo`, not with the kind
        from jigs_testing.plan import DemoPlan, mcp_tool, scripted_command, scripted_write

        descriptor = PiDescriptor(
            model=OpenAICompatible(
                name="jigs-demo",
                base_url=server.openai_base_url,
                model="demo-model",
                api_key_env=DEMO_KEY_ENV,
            )
        )
        return DemoPlan(
            descriptor=descriptor,
            write_file=scripted_write(
                "write", lambda path, content: {"path": path, "content": content}
            ),
            edit_file=scripted_write(
                "write", lambda path, content: {"path": path, "content": content}
            ),
            run_command=scripted_command("bash", lambda command: {"command": command}),
            host_env={DEMO_KEY_ENV: "sk-jigs-demo-placeholder"},
            step_tool=mcp_tool,
        )

    # ---------------------------------------------------------------- the turn pieces

    async def prepare(self, target: HarnessTarget[PiDescriptor], ctx: HarnessContext) -> Any:
        descriptor = target.descriptor
        # launch what resolve_executable returns (the contract: the conformance kit swaps it)
        resolved = self.resolve_executable(ctx.env)
        pi = launchable(resolved.path, resolved.source)
        endpoint = ctx.model_endpoint
        key = descriptor.model.key_env()
        if key is not None and endpoint is None:
            raise DescriptorError(
                f"the pi descriptor names {key} for its model key, but the step has no proxied "
                f"model endpoint; run the step through jigs (run_agent), which starts the "
                f"credential proxy",
                kind="pi",
                key="model.api_key_env",
            )
        home = PiHome(descriptor, base_url=endpoint.base_url if endpoint is not None else None)
        ctx.callback(home.remove)
        _expose(ctx, pi.argv, home.path, descriptor)
        prompt_args: list[str] = []
        if descriptor.system_prompt is not None:
            path = private_file(home.path / "system-prompt.md", descriptor.system_prompt.encode())
            prompt_args += ["--system-prompt", str(path)]
        for number, text in enumerate(descriptor.append_system_prompt):
            path = private_file(home.path / f"append-system-prompt-{number}.md", text.encode())
            prompt_args += ["--append-system-prompt", str(path)]
        sessions = ctx.state_dir / _SESSIONS
        sessions.mkdir(parents=True, exist_ok=True)
        key_env = (key, endpoint.key) if key is not None and endpoint is not None else None
        cache = None
        if ctx.sandbox is not None and len(pi.argv) > 1:  # a Node Pi, in a fresh /tmp
            cache = await compile_cache(pi, ctx.env, ctx.log)
            if cache is not None:
                ctx.expose(cache)
        return _Prepared(pi, home.path, sessions, tuple(prompt_args), key_env, cache)

    def launch_turn(
        self, turn: TurnSpec[PiDescriptor], ctx: HarnessContext, state: Any
    ) -> TurnLaunch:
        prepared: _Prepared = state
        _refuse_options(turn.options)
        prompt = _prompt_bytes(turn.prompt)
        # a gated turn speaks RPC: the gate's extension asks the step before each tool call
        mode = "json" if turn.gate is None else "rpc"
        argv = [*prepared.pi.argv, "--mode", mode, "--model", model_flag(turn.descriptor)]
        if turn.tool_free:  # an ask: no tool, nothing loaded, no session kept
            argv += ["--no-session", *_TOOL_FREE_ARGS]
            if turn.descriptor.thinking is not None:
                argv += ["--thinking", turn.descriptor.thinking]
            expected = None
        else:
            session_args, expected = _session_args(turn, prepared.sessions)
            argv += session_args
            argv += _descriptor_args(turn.descriptor)
        argv += prepared.prompt_args
        if turn.images:
            accept_images(prepared.home)
        decoder = PiDecoder(expected, cli=str(prepared.pi.path))
        if turn.gate is not None:
            extension = prepared.home / "jigs-tool-gate.js"
            if not extension.exists():
                private_file(extension, EXTENSION.encode())
            argv += ["-e", str(extension)]
            # RPC mode takes no @file arguments: the images travel in the prompt command
            driver = GateDriver(turn.gate, turn.prompt, turn.images)
            return TurnLaunch(
                argv,
                env=_turn_env(prepared),
                driver=driver,
                exit_grace=SETTLE_GRACE,
                decoder=decoder,
            )
        # Pi puts the piped prompt first, then each @file (an image part) of the message
        argv += [f"@{image.path}" for image in turn.images]
        return TurnLaunch(
            argv,
            env=_turn_env(prepared),
            stdin=prompt,
            exit_grace=SETTLE_GRACE,
            decoder=decoder,
        )

    def decoder(self, turn: TurnSpec[PiDescriptor]) -> PiDecoder:
        return PiDecoder(turn.session_id)


def _refuse_options(options: Mapping[str, Any]) -> None:
    """Pi takes no provider options (the core refuses a tool gate for it: ``tool_gate_refusal``)."""
    if options:
        raise InvalidInputError(
            f"the pi kind takes no provider options besides on_event (got "
            f"{', '.join(sorted(map(str, options)))})",
            argument="provider_options",
        )


def _prompt_bytes(prompt: str) -> bytes:
    """The prompt as Pi reads it on stdin; a lone surrogate is :class:`PromptError`."""
    try:
        return prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise PromptError(
            "the prompt holds text that is not valid Unicode (a lone surrogate); encode "
            "binary data or keep it in a file in the worktree"
        ) from None


def _session_args(turn: TurnSpec[PiDescriptor], sessions: Path) -> tuple[list[str], str | None]:
    """The session flags (a new id, the resumed file, or a fork of it) and the session id the
    turn must report (None for a fork: Pi picks the copy's id)."""
    argv = ["--session-dir", str(sessions)]
    if turn.session_id is None:
        expected = str(uuid.uuid4())
        return [*argv, "--session-id", expected], expected
    resume_file = _session_file(sessions, turn.session_id)
    if resume_file is None:  # removed since verify_resume
        raise _missing(turn.session_id, sessions)
    if turn.fork:
        # a copy under Pi's new id: the resumed file stays as its ref names it
        return [*argv, "--fork", str(resume_file)], None
    return [*argv, "--session", str(resume_file)], turn.session_id


#: A tool-free turn's flags: no tool (built-in or extension), no MCP, nothing discovered or
#: loaded (extensions, skills, prompt templates, themes, context files, project-local files).
_TOOL_FREE_ARGS = ("-nt", "--no-mcp", "-ne", "-ns", "-np", "--no-themes", "-nc", "-na")


def _descriptor_args(descriptor: PiDescriptor) -> list[str]:
    """The flags for what Pi loads (no extensions, skills, prompt templates, themes or context
    files but those the descriptor names), its tools, thinking level and session name."""
    argv = ["-ne", "-ns", "-np", "--no-themes", "-na"]
    excluded = list(descriptor.exclude_tools)
    if descriptor.mcp_servers:
        argv += ["-e", "builtin:mcp"]
        excluded += excluded_tools(descriptor.mcp_servers)
    else:
        argv.append("--no-mcp")
    if excluded:
        argv += ["--exclude-tools", ",".join(excluded)]
    if not descriptor.context_files:
        argv.append("-nc")
    if not descriptor.builtin_tools:
        argv.append("--no-builtin-tools")
    for skill in descriptor.skills:
        argv += ["--skill", skill]
    for template in descriptor.prompt_templates:
        argv += ["--prompt-template", template]
    if descriptor.thinking is not None:
        argv += ["--thinking", descriptor.thinking]
    if descriptor.tools is not None:
        tools = allowed_tools(descriptor.tools, descriptor.mcp_servers)
        argv += ["--tools", ",".join(tools)] if tools else ["-nt"]
    if descriptor.session_name is not None:
        argv += ["--name", descriptor.session_name]
    return argv


def _turn_env(prepared: _Prepared) -> dict[str, str]:
    """Pi's variables on top of the step's: its private agent dir, offline, no telemetry, the
    compile cache and the proxy's placeholder key."""
    env = {
        "PI_CODING_AGENT_DIR": str(prepared.home),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }
    if prepared.compile_cache is not None:
        env["NODE_COMPILE_CACHE"] = str(prepared.compile_cache)
    if prepared.key_env is not None:
        name, placeholder = prepared.key_env
        env[name] = placeholder
    return env


def _expose(
    ctx: HarnessContext, argv: Sequence[str], agent_dir: Path, descriptor: PiDescriptor
) -> None:
    """What Pi's sandbox shows: its private agent dir (read-write), the Node package it runs
    from (the whole installation, up to its top ``node_modules``) and the skills and prompt
    templates the descriptor names outside the worktree (read-only)."""
    ctx.expose(agent_dir, writable=True)
    for path in install_paths(argv):
        ctx.expose(path)
    for named in (*descriptor.skills, *descriptor.prompt_templates):
        if os.path.isabs(named):
            ctx.expose(named)
