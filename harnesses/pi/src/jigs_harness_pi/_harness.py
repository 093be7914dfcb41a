"""The ``pi`` kind: whole turns of ``pi --mode json`` under jigs' policy; no model object.

One :meth:`PiHarness.run` is one Pi invocation (two when a structured answer needs a re-ask):

- the CLI is resolved (:mod:`jigs_harness_pi._executable`) and launched as ``[node, cli.js]``
  with the wheel's Node, in the worktree, with exactly the step's environment plus the names Pi
  needs (``PI_CODING_AGENT_DIR`` of a private agent dir, offline and no telemetry), in its own
  process group, stdin closed;
- discovery of extensions, skills, prompt templates, themes, context files and project-local
  ``.pi`` files is off (``-ne -ns -np --no-themes -nc -na``); Pi's built-in MCP is off
  (``--no-mcp``) unless the step declares servers: then only the built-in MCP extension is
  loaded (``-e builtin:mcp``), reading the ``mcp.json`` jigs wrote into the private agent dir
  (:mod:`jigs_harness_pi._mcp`), and disabled tools go to ``--exclude-tools``;
- sessions live in ``ctx.state_dir / "sessions"``: a fresh turn uses a session id jigs chooses
  (``--session-id``), a resumed one opens the proven session file (``--session``), and the id Pi
  reports must be the one asked for (:class:`AgentSessionError` otherwise);
- the stream is read line by line (:class:`~jigs_harness_pi._stream.PiStream`); a process that
  exits non-zero or by a signal is :class:`AgentCrashedError`; one that keeps running after
  ``agent_settled`` is stopped after :data:`SETTLE_GRACE` seconds.
"""

from __future__ import annotations

import glob
import re
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import anyio
from jigs.checks import Check, CheckFailure, CheckOk, CheckResult
from jigs.descriptors import HarnessDescriptor
from jigs.errors import AgentCrashedError, AgentSessionError, CliNotFoundError
from jigs.executables import Resolved, parse_version
from jigs.plugin import AgentRequest, AgentTurn, Harness, HarnessContext, HarnessTarget

from jigs_harness_pi import _structured
from jigs_harness_pi._descriptor import PiDescriptor
from jigs_harness_pi._executable import (
    INSTALL_FIX,
    MIN_VERSION,
    PiExecutable,
    install_pi,
    resolve_pi,
)
from jigs_harness_pi._home import PiHome, model_flag
from jigs_harness_pi._mcp import allowed_tools, excluded_tools
from jigs_harness_pi._stream import PiOutcome, PiStream

if TYPE_CHECKING:
    from jigs.testing import ModelServer
    from jigs.testing.plan import DemoPlan

__all__ = ["SETTLE_GRACE", "PiHarness"]

#: The dummy key variable ``jigs demo`` sets for the pi kind (its value is not a secret).
DEMO_KEY_ENV = "JIGS_DEMO_PI_KEY"

#: Seconds Pi may take to exit after ``agent_settled`` before jigs stops its group.
SETTLE_GRACE = 3.0
#: Seconds Pi may take to exit after closing its stdout.
EXIT_GRACE = 5.0
_SESSIONS = "sessions"


_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def _session_file(sessions: Path, session_id: str) -> Path | None:
    """Pi names session files ``<timestamp>_<id>.jsonl``; the newest match wins. An id that
    is not a plain token (``/``, glob characters) never matches."""
    if not _SESSION_ID.fullmatch(session_id) or not sessions.is_dir():
        return None
    matches = sorted(sessions.glob(f"*_{glob.escape(session_id)}.jsonl"))
    return matches[-1] if matches else None


class PiHarness(Harness):
    """The Pi coding agent (``@earendil-works/pi-coding-agent`` 1.6+)."""

    kind: ClassVar[str] = "pi"
    display_name: ClassVar[str] = "Pi"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = PiDescriptor
    has_model: ClassVar[bool] = False
    sets_env: ClassVar[frozenset[str]] = frozenset(
        {
            "PI_CODING_AGENT_DIR",
            "PI_CODING_AGENT_SESSION_DIR",
            "PI_OFFLINE",
            "PI_SKIP_VERSION_CHECK",
            "PI_TELEMETRY",
            "PI_PACKAGE_DIR",
        }
    )

    # ---------------------------------------------------------------- resolution and checks

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        """The Pi CLI jigs would run (for ``require_cli`` and ``jigs doctor``)."""
        pi = resolve_pi(env)
        return Resolved(pi.path, pi.source)

    def env_allowlist(self, descriptor: HarnessDescriptor) -> Collection[str]:
        return descriptor.env_names()

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

    def descriptor_checks(
        self, descriptor: HarnessDescriptor, env: Mapping[str, str]
    ) -> Sequence[Check]:
        assert isinstance(descriptor, PiDescriptor)
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

    async def verify_resume(self, target: HarnessTarget, ctx: HarnessContext) -> None:
        assert target.resume is not None
        sessions = ctx.state_dir / _SESSIONS
        if _session_file(sessions, target.resume.id) is None:
            raise AgentSessionError(
                f"Pi session {target.resume.id} is missing from {sessions}; start without resume",
                kind=self.kind,
                session_id=target.resume.id,
            )

    async def install(self, env: Mapping[str, str]) -> str:
        return await install_pi(env)

    def demo_plan(self, server: ModelServer) -> DemoPlan | None:
        """Pi against the local server's Chat Completions API; files are written with Pi's
        own ``write`` tool."""
        from jigs.testing.plan import DemoPlan, scripted_write

        from jigs_harness_pi._descriptor import OpenAICompatible

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
            host_env={DEMO_KEY_ENV: "sk-jigs-demo-placeholder"},
        )

    # ---------------------------------------------------------------- running a turn

    async def run(self, request: AgentRequest, ctx: HarnessContext) -> AgentTurn:
        target = request.target
        descriptor = target.descriptor
        assert isinstance(descriptor, PiDescriptor)
        pi = resolve_pi(ctx.env)
        home = PiHome(descriptor)
        ctx.callback(home.remove)
        sessions = ctx.state_dir / _SESSIONS
        sessions.mkdir(parents=True, exist_ok=True)

        schema = request.output_schema
        prompt = request.prompt + (_structured.instruction(schema) if schema else "")
        if target.resume is not None:
            session_id = target.resume.id
            resume_file = _session_file(sessions, session_id)
            if resume_file is None:  # removed since verify_resume
                raise AgentSessionError(
                    f"Pi session {session_id} is missing from {sessions}; start without resume",
                    kind=self.kind,
                    session_id=session_id,
                )
        else:
            session_id = str(uuid.uuid4())
            resume_file = None

        outcome = await self._invoke(
            pi,
            descriptor=descriptor,
            target=target,
            ctx=ctx,
            home=home,
            sessions=sessions,
            session_id=session_id,
            resume_file=resume_file,
            prompt=prompt,
        )
        output = None
        if schema is not None:
            output, problem = _structured.extract(outcome.text, schema)
            if problem is not None:
                ctx.log.info("pi.structured.reask", problem=problem, session_id=session_id)
                again = _session_file(sessions, session_id)
                if again is None:
                    raise AgentSessionError(
                        f"Pi did not write session {session_id} to {sessions}, so jigs cannot "
                        f"ask again for a structured answer",
                        kind=self.kind,
                        session_id=session_id,
                    )
                first = outcome
                outcome = await self._invoke(
                    pi,
                    descriptor=descriptor,
                    target=target,
                    ctx=ctx,
                    home=home,
                    sessions=sessions,
                    session_id=session_id,
                    resume_file=again,
                    prompt=_structured.reask_prompt(problem, schema),
                )
                outcome = _merge_usage(first, outcome)
                output, problem = _structured.extract(outcome.text, schema)
        return AgentTurn(
            text=outcome.text,
            session_id=outcome.session_id,
            output=output,
            usage=outcome.usage,
            provider_metadata={
                "pi": {
                    "session_id": outcome.session_id,
                    "model": outcome.model,
                    "provider": outcome.provider,
                    "stop_reason": outcome.stop_reason,
                    "tool_calls": outcome.tool_calls,
                    "cli": str(pi.path),
                }
            },
        )

    def _argv(
        self,
        pi: PiExecutable,
        *,
        descriptor: PiDescriptor,
        sessions: Path,
        session_id: str,
        resume_file: Path | None,
        prompt: str,
    ) -> list[str]:
        argv = [*pi.argv, "--mode", "json", "--model", model_flag(descriptor)]
        argv += ["--session-dir", str(sessions)]
        if resume_file is not None:
            argv += ["--session", str(resume_file)]
        else:
            argv += ["--session-id", session_id]
        argv += ["-ne", "-ns", "-np", "--no-themes", "-na"]
        if descriptor.mcp_servers:
            argv += ["-e", "builtin:mcp"]
            excluded = excluded_tools(descriptor.mcp_servers)
            if excluded:
                argv += ["--exclude-tools", ",".join(excluded)]
        else:
            argv.append("--no-mcp")
        if not descriptor.context_files:
            argv.append("-nc")
        for skill in descriptor.skills:
            argv += ["--skill", skill]
        if descriptor.thinking is not None:
            argv += ["--thinking", descriptor.thinking]
        if descriptor.tools is not None:
            tools = allowed_tools(descriptor.tools, descriptor.mcp_servers)
            argv += ["--tools", ",".join(tools)] if tools else ["-nt"]
        # `--` ends option parsing, so a prompt that starts with "-" stays a prompt; Pi still
        # reads an argument starting with "@" as a file to attach, so such a prompt gets a space.
        argv += ["--", f" {prompt}" if prompt.startswith("@") else prompt]
        return argv

    async def _invoke(
        self,
        pi: PiExecutable,
        *,
        descriptor: PiDescriptor,
        target: HarnessTarget,
        ctx: HarnessContext,
        home: PiHome,
        sessions: Path,
        session_id: str,
        resume_file: Path | None,
        prompt: str,
    ) -> PiOutcome:
        env = dict(ctx.env)
        env.update(
            PI_CODING_AGENT_DIR=str(home.path),
            PI_OFFLINE="1",
            PI_SKIP_VERSION_CHECK="1",
            PI_TELEMETRY="0",
        )
        argv = self._argv(
            pi,
            descriptor=descriptor,
            sessions=sessions,
            session_id=session_id,
            resume_file=resume_file,
            prompt=prompt,
        )
        started = time.perf_counter()
        try:
            proc = await ctx.launch(argv, cwd=target.cwd, env=env, owner=f"pi ({pi.path})")
        except OSError as exc:
            raise CliNotFoundError(
                self.kind, [f"{pi.source}: {pi.path} could not be started: {exc}"], INSTALL_FIX
            ) from exc
        ctx.log.info("pi.launched", pid=proc.pid, cli=str(pi.path), resume=resume_file is not None)
        stream = PiStream()
        try:
            while (line := await proc.read_line()) is not None:
                stream.feed(line)
                if stream.settled:
                    break
            code: int | None = None
            with anyio.move_on_after(SETTLE_GRACE if stream.settled else EXIT_GRACE):
                code = await proc.wait()
            if code is None:
                ctx.log.warning("pi.exit.timeout", settled=stream.settled, pid=proc.pid)
            if code is not None and code != 0:
                how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
                raise AgentCrashedError(
                    f"pi {how} after {stream.lines} line(s) of output"
                    f"{'' if stream.settled else ' and before the turn settled'}",
                    kind=self.kind,
                    returncode=code,
                    stderr_tail=proc.stderr_tail(),
                )
            outcome = stream.outcome()
        finally:
            await proc.stop()
        if outcome.session_id != session_id:
            raise AgentSessionError(
                f"pi reported session {outcome.session_id!r} after jigs asked for {session_id!r}",
                kind=self.kind,
                session_id=session_id,
            )
        ctx.log.info(
            "pi.turn.finished",
            seconds=round(time.perf_counter() - started, 4),
            lines=stream.lines,
            tool_calls=outcome.tool_calls,
            session_id=session_id,
        )
        return outcome


def _merge_usage(first: PiOutcome, second: PiOutcome) -> PiOutcome:
    a, b = first.usage, second.usage

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    usage = type(a)(
        input_tokens=add(a.input_tokens, b.input_tokens),
        output_tokens=add(a.output_tokens, b.output_tokens),
        total_tokens=add(a.total_tokens, b.total_tokens),
        cached_input_tokens=add(a.cached_input_tokens, b.cached_input_tokens),
        cost_usd=None
        if a.cost_usd is None and b.cost_usd is None
        else (a.cost_usd or 0.0) + (b.cost_usd or 0.0),
    )
    return PiOutcome(
        text=second.text,
        session_id=second.session_id,
        usage=usage,
        model=second.model,
        provider=second.provider,
        stop_reason=second.stop_reason,
        tool_calls=first.tool_calls + second.tool_calls,
    )
