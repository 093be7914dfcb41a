"""The per-step sandbox: what a step's agent may see of the machine and reach on the network.

Every process a step launches runs in a bubblewrap sandbox of its own
(:mod:`jigs._isolation` says whether the host allows it): the system read-only, the worktree
and the step's private dirs read-write, an empty ``HOME``, no capabilities, and a network
namespace in which only what jigs serves for the step (its credential proxy, relays to declared
MCP servers, the egress proxy for allowed hosts) can be reached.
"""

from jigs.sandbox._view import MASKED, NetworkMode, SandboxView

__all__ = ["MASKED", "NetworkMode", "SandboxView"]
