"""The ``opencode`` kind: ``opencode run --format json``, one process per turn (``run_agent``).

The core runs each turn (deadlines, limits, errors, structured output, the re-ask); this module
only says how opencode is launched:

- :meth:`OpencodeHarness.prepare` (once per step): resolves the binary, writes the private home
  and config (:mod:`._config`) and opens the step's session databases (:mod:`._sessions`);
- :meth:`OpencodeHarness.launch_turn`: ``opencode run --format json --auto --title jigs
  --thinking`` with the prompt on stdin; ``--session <id>`` to continue, ``--fork`` besides
  for the first turn of a resumed step. ``--title`` keeps opencode from asking the model for a
  title (a side request the scripted model server would answer with the turn's reply);
  ``--auto`` approves what the config leaves enabled (an unattended run never waits for a
  prompt); ``--thinking`` prints reasoning parts (:class:`~jigs.events.ReasoningDelta`).

Model key: a descriptor naming ``api_key_env`` gets a bearer :class:`~jigs.plugin.ModelRoute` to
its ``base_url``; the config's provider points at the step's proxy with its placeholder key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from jigs.checks import Check
from jigs.descriptors import HarnessDescriptor
from jigs.errors import InvalidInputError, PromptError
from jigs.events import AgentEvent
from jigs.executables import Resolved, version_check
from jigs.plugin import Harness, HarnessContext, HarnessTarget, ModelRoute, TurnLaunch, TurnSpec

from jigs_harness_opencode._checks import project_config_check
from jigs_harness_opencode._config import SETS_ENV, write_home
from jigs_harness_opencode._descriptor import OpencodeDescriptor
from jigs_harness_opencode._executable import (
    INSTALL_FIX,
    MIN_VERSION,
    install_opencode,
    resolve_opencode,
)
from jigs_harness_opencode._sessions import (
    DB_NAME,
    SessionDirs,
    artifacts,
    has_session,
    missing,
    rehome,
)
from jigs_harness_opencode._stream import OpencodeDecoder

if TYPE_CHECKING:
    from jigs_testing import ConfigFile, ModelServer
    from jigs_testing.plan import DemoPlan

__all__ = ["OpencodeHarness"]

#: The dummy key variable ``jigs demo`` sets for the opencode kind (its value is not a secret).
DEMO_KEY_ENV = "JIGS_DEMO_OPENCODE_KEY"
_SESSIONS = "sessions"


@dataclass(frozen=True)
class _Prepared:
    binary: Path
    env: Mapping[str, str]
    sessions: SessionDirs


class _Reporting(OpencodeDecoder):
    """The decoder of one launch, telling the step's databases which session ran where."""

    def __init__(
        self,
        expected: str | None,
        cli: str,
        sessions: SessionDirs,
        at: tuple[Path, list[str]],
    ) -> None:
        super().__init__(expected, cli)
        self._sessions, self._at = sessions, at

    def _session(self, reported: Any) -> list[AgentEvent]:
        events = super()._session(reported)
        if events and self.session_id is not None:
            directory, ids = self._at
            self._sessions.started(directory, self.session_id)
            ids.append(self.session_id)
        return events


class OpencodeHarness(Harness[OpencodeDescriptor]):
    """opencode (``opencode-ai`` on npm, 1.18+), driven through ``opencode run --format json``."""

    kind: ClassVar[str] = "opencode"
    contract: ClassVar[str | None] = "2.1"  # session_id_pattern
    display_name: ClassVar[str] = "opencode"
    descriptor_type: ClassVar[type[HarnessDescriptor]] = OpencodeDescriptor
    has_model: ClassVar[bool] = False
    structured_output: ClassVar[Literal["native", "prompted"]] = "prompted"
    install_hint: ClassVar[str] = INSTALL_FIX
    sets_env: ClassVar[frozenset[str]] = SETS_ENV
    tool_gate_refusal: ClassVar[str] = (
        "opencode run asks no one before a tool call (its only per-call hook is a plugin, and "
        "jigs runs opencode without plugins); turn tools off with the descriptor's "
        "disabled_tools"
    )
    #: opencode's ids (``ses_`` and 26 letters and digits) look like tokens to the core's
    #: secret test: declared, so a step can resume them (contract 2.1)
    session_id_pattern: ClassVar[str | None] = r"ses_[0-9A-Za-z]{20,40}"

    def resolve_executable(self, env: Mapping[str, str]) -> Resolved:
        return resolve_opencode(env)

    def installation_checks(self, env: Mapping[str, str]) -> Sequence[Check]:
        return [
            version_check(
                "opencode",
                "opencode CLI",
                self.resolve_executable,
                env,
                minimum=MIN_VERSION,
                fix=INSTALL_FIX,
            )
        ]

    def jit_checks(
        self, target: HarnessTarget[OpencodeDescriptor], env: Mapping[str, str]
    ) -> Sequence[Check]:
        return [project_config_check(target.cwd)]

    def tool_free_problem(self, descriptor: OpencodeDescriptor) -> str | None:
        """An ask runs with every tool denied in opencode's config (opencode then offers the
        model none), no project config or context file, and its session database in a private
        dir removed with the step."""
        return None

    def model_route(self, descriptor: OpencodeDescriptor) -> ModelRoute | None:
        if descriptor.api_key_env is None or descriptor.base_url is None:
            return None
        return ModelRoute(
            upstream=descriptor.base_url,
            key_env=descriptor.api_key_env,
            scheme="bearer",
            model_calls=("POST /chat/completions",),
        )

    async def install(self, env: Mapping[str, str]) -> str:
        return await install_opencode(env)

    # ---------------------------------------------------------------- sessions

    async def verify_resume(
        self, target: HarnessTarget[OpencodeDescriptor], ctx: HarnessContext
    ) -> None:
        resume = target.resume
        sessions = ctx.state_dir / _SESSIONS
        if resume is not None and not has_session(sessions, resume.id):
            raise missing(resume.id, sessions)
        if resume is not None:  # fetched from the store: its worktree may be another machine's
            rehome(sessions, resume.id, target.cwd)

    def session_artifacts(
        self,
        session_id: str,
        ctx: HarnessContext,
        cwd: Path,
        *,
        names: Collection[str] | None = None,
    ) -> Mapping[str, Path]:
        """The session's database, ``<session id>/opencode.db`` in the run's state dir."""
        found = artifacts(ctx.state_dir / _SESSIONS, session_id, names)
        return {name: path for name, path in found.items() if Path(name).name == DB_NAME}

    # ---------------------------------------------------------------- the turn pieces

    async def prepare(
        self, target: HarnessTarget[OpencodeDescriptor], ctx: HarnessContext
    ) -> _Prepared:
        # launch what resolve_executable returns (the contract: the conformance kit swaps it)
        binary = self.resolve_executable(ctx.env).path
        endpoint = ctx.model_endpoint
        descriptor = target.descriptor
        base_url = endpoint.base_url if endpoint is not None else descriptor.base_url
        assert base_url is not None  # the descriptor refuses an endpoint without one
        key = endpoint.key if endpoint else None
        env = write_home(descriptor, ctx, base_url, key, tool_free=target.tool_free)
        if target.tool_free:  # an ask keeps no session: its database dies with the step
            sessions = SessionDirs(ctx.private_dir("jigs-opencode-ask-"))
        else:
            sessions = SessionDirs(ctx.state_dir / _SESSIONS)
            sessions.root.mkdir(parents=True, exist_ok=True)
            ctx.callback(sessions.close)
        return _Prepared(binary, env, sessions)

    def launch_turn(
        self, turn: TurnSpec[OpencodeDescriptor], ctx: HarnessContext, state: Any
    ) -> TurnLaunch:
        prepared: _Prepared = state
        if turn.options:
            raise InvalidInputError(
                f"the opencode kind takes no provider options besides on_event (got "
                f"{', '.join(sorted(map(str, turn.options)))}); opencode runs the tools the "
                f"descriptor leaves enabled without asking: turn one off with disabled_tools",
                argument="provider_options",
            )
        try:
            prompt = turn.prompt.encode("utf-8")
        except UnicodeEncodeError:
            raise PromptError(
                "the prompt holds text that is not valid Unicode (a lone surrogate); encode "
                "binary data or keep it in a file in the worktree"
            ) from None
        at = prepared.sessions.for_turn(turn.session_id, turn.fork)
        argv = [str(prepared.binary), "run", "--format", "json", "--auto", "--title", "jigs"]
        argv.append("--thinking")  # reasoning parts as events (ReasoningDelta)
        if turn.session_id is not None:
            argv += ["--session", turn.session_id, *(["--fork"] if turn.fork else [])]
        env = {**prepared.env, "OPENCODE_DB": str(at[0] / DB_NAME)}
        expected = turn.session_id if not turn.fork else None
        decoder = _Reporting(expected, str(prepared.binary), prepared.sessions, at)
        return TurnLaunch(argv, env=env, stdin=prompt, decoder=decoder)

    def decoder(self, turn: TurnSpec[OpencodeDescriptor]) -> OpencodeDecoder:
        return OpencodeDecoder(turn.session_id if not turn.fork else None)

    # ---------------------------------------------------------------- the kit's hooks

    def config_files(self) -> Sequence[ConfigFile]:
        """What opencode would read from the worktree and HOME (see :mod:`._config_files`)."""
        from jigs_harness_opencode._config_files import CONFIG_FILES  # imports jigs_testing

        return CONFIG_FILES

    def demo_plan(self, server: ModelServer) -> DemoPlan:
        """opencode against the local server's Chat Completions API; files are written with
        opencode's own ``write`` tool, commands run with its ``bash`` tool."""
        from jigs_testing.plan import DemoPlan, scripted_command, scripted_write

        return DemoPlan(
            descriptor=OpencodeDescriptor(
                base_url=server.openai_base_url, model="demo-model", api_key_env=DEMO_KEY_ENV
            ),
            write_file=scripted_write(
                "write", lambda path, content: {"filePath": path, "content": content}
            ),
            run_command=scripted_command(
                "bash", lambda command: {"command": command, "description": "run a command"}
            ),
            host_env={DEMO_KEY_ENV: "sk-jigs-demo-placeholder"},
            # opencode spends ~3.5 s of CPU before its first tool runs (its database, its tool
            # registry): on a loaded 2-core machine, three times that
            start_seconds=12.0,
            # opencode names an MCP server's tool <server>_<tool>
            step_tool=lambda name: f"tools_{name}",
        )
