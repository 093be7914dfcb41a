"""How a harness kind takes part in ``jigs demo`` and the conformance kit.

A kind takes part by defining a ``demo_plan(server)`` method on its harness class (it is not part
of the core contract :class:`jigs.plugin.Harness`; see :class:`SupportsDemo`) that returns a
:class:`DemoPlan`: a descriptor pointed at the local :class:`~jigs_testing.ModelServer`, the dummy
variables it needs in the host environment, and the scripted turns. :meth:`DemoPlan.write_file`
queues the replies that make the agent create a file with the CLI's *own* file-writing tool and
returns the prompt; :meth:`DemoPlan.recall` queues a reply computed from the resumed request (how
many messages it carried) and returns the prompt. :meth:`DemoPlan.run_command` queues the replies
that make the agent run a shell command with the CLI's *own* shell tool (the conformance kit's
isolation checks: the command's output reaches the model in the next request) and returns the
prompt; ``None`` when the kind has no shell tool.

A read-only kind (a reviewer that never writes files) sets ``writes=False``: its ``write_file``
then scripts a turn with one (read-only) tool call whose final answer contains ``content``, and
the kit checks that answer instead of a file on disk.

The method is looked up on the harness object (:func:`demo_plan_of`), so a kind's distribution
needs jigs-testing only where the demo or the kit runs: import its names under ``TYPE_CHECKING``
and inside the method::

    if TYPE_CHECKING:
        from jigs_testing import DemoPlan, ModelServer

    class MyHarness(Harness[MyDescriptor]):
        def demo_plan(self, server: ModelServer) -> DemoPlan:
            from jigs_testing.plan import DemoPlan, scripted_command, scripted_write

            return DemoPlan(
                descriptor=MyDescriptor(base_url=server.openai_base_url, api_key_env="MY_KEY"),
                write_file=scripted_write("write", lambda path, text: {"path": path, "text": text}),
                run_command=scripted_command("shell", lambda command: {"command": command}),
                host_env={"MY_KEY": "sk-demo"},
            )
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jigs.descriptors import HarnessDescriptor

from jigs_testing import reply, text, tool_call

if TYPE_CHECKING:
    from jigs_testing._server.server import ModelServer

__all__ = [
    "DemoPlan",
    "SupportsDemo",
    "demo_plan_of",
    "has_demo_plan",
    "how_to_write_demo_plan",
    "scripted_command",
    "scripted_hang",
    "scripted_recall",
    "scripted_write",
]


def scripted_write(
    tool: str, arguments: Callable[[str, str], Mapping[str, Any]]
) -> Callable[[ModelServer, str, str], str]:
    """A ``write_file`` for kinds whose model calls a tool: the scripted model calls ``tool``
    with ``arguments(path, content)``, then answers with text once the tool has run."""

    def write(server: ModelServer, path: str, content: str) -> str:
        server.add(tool_call(tool, dict(arguments(path, content))), text(f"I wrote {path}."))
        return f"Create the file {path} containing {content!r}."

    return write


def scripted_command(
    tool: str, arguments: Callable[[str], Mapping[str, Any]]
) -> Callable[[ModelServer, str], str]:
    """A ``run_command`` for kinds whose model calls a shell tool: the scripted model calls
    ``tool`` with ``arguments(command)``, then answers with text once the tool has returned."""

    def run(server: ModelServer, command: str) -> str:
        server.add(tool_call(tool, dict(arguments(command))), text("The command has run."))
        return "Run the command you are given with your shell tool."

    return run


def scripted_recall(server: ModelServer) -> str:
    """The second turn: the model reports how many messages the resumed request carried."""
    server.add(
        reply(
            lambda req: text(
                f"I remember: this request carried {req.message_count} "
                f"messages, including the file I wrote."
            )
        )
    )
    return "What did you do in the previous turn?"


def scripted_hang(server: ModelServer) -> str:
    """A turn whose model endpoint hangs: the reply starts only after ten minutes."""
    server.add(text("too late", delay=600))
    return "Say hello."


def mcp_tool(name: str) -> str:
    """``mcp__tools__<name>``: the name Claude Code, Codex and Pi give the step's Python tool
    ``name`` (a :attr:`DemoPlan.step_tool`)."""
    return f"mcp__tools__{name}"


@dataclass(frozen=True, slots=True)
class DemoPlan:
    """A kind's part in the demo: see the module docstring."""

    descriptor: HarnessDescriptor
    write_file: Callable[[ModelServer, str, str], str]
    recall: Callable[[ModelServer], str] = scripted_recall
    #: A prompt whose model request hangs (the conformance kit's idle_timeout check).
    hang: Callable[[ModelServer], str] = scripted_hang
    host_env: Mapping[str, str] = field(default_factory=dict)
    agents_env: tuple[str, ...] = ()
    #: ``run_command(server, command) -> prompt``: the agent runs ``command`` with its own shell
    #: tool (see :func:`scripted_command`); None when the kind's CLI has no shell tool.
    run_command: Callable[[ModelServer, str], str] | None = None
    #: ``edit_file(server, absolute_path, content) -> prompt``: the agent writes the file with the
    #: CLI's own file-edit tool (not its shell), for the kit's ``tool_gate`` check (see
    #: :func:`scripted_write`); None: that check edits through ``write_file``.
    edit_file: Callable[[ModelServer, str, str], str] | None = None
    #: False for a read-only kind: ``write_file`` then scripts a turn whose answer contains the
    #: content (with one read-only tool call), and the kit checks the answer, not a file.
    writes: bool = True
    #: Seconds the kind's CLI may take, on a loaded machine, from its launch to running its
    #: first tool (a large binary that migrates its database and builds its tools at every
    #: start: opencode). The kit's ``turn_deadline`` check gives the turn that much on top of
    #: its 3 s deadline, so the deadline still falls while the agent's command runs.
    start_seconds: float = 0.0
    #: ``step_tool(name) -> str``: the name the kind's CLI gives the step's Python tool ``name``
    #: (served as the MCP server ``tools``: ``mcp__tools__<name>`` for Claude Code, Codex and Pi,
    #: ``tools_<name>`` for opencode), for the kit's ``step_tools`` check to script its calls;
    #: None when the CLI calls no MCP tools (the check is then skipped by design).
    step_tool: Callable[[str], str] | None = None


@runtime_checkable
class SupportsDemo(Protocol):
    """A harness that takes part in ``jigs demo`` and the conformance kit."""

    def demo_plan(self, server: ModelServer) -> DemoPlan | None:
        """The kind's :class:`DemoPlan` against ``server``; None when it cannot run there."""
        ...


def how_to_write_demo_plan(kind: str) -> str:
    """What to tell the author of ``kind`` whose harness has no ``demo_plan`` method."""
    return (
        f"the {kind} harness has no demo_plan(server) method: define "
        f"`def demo_plan(self, server: ModelServer) -> DemoPlan` on its Harness class, returning "
        f"a jigs_testing.DemoPlan whose descriptor points at server (server.anthropic_base_url or "
        f"server.openai_base_url) and whose write_file/run_command script the CLI's own tools "
        f"(jigs_testing.plan.scripted_write / scripted_command); see jigs_testing.plan"
    )


def has_demo_plan(harness: object) -> bool:
    """Whether ``harness`` defines ``demo_plan`` (:class:`SupportsDemo`). Looked up on the object
    each time: ``isinstance`` against the protocol caches its answer per class."""
    return callable(getattr(harness, "demo_plan", None))


def demo_plan_of(harness: object, server: ModelServer) -> DemoPlan | None:
    """``harness.demo_plan(server)`` when the harness defines it (:func:`has_demo_plan`), else
    None; :func:`how_to_write_demo_plan` says what to do then."""
    if not has_demo_plan(harness):
        return None
    plan: DemoPlan | None = getattr(harness, "demo_plan")(server)  # noqa: B009
    return plan
