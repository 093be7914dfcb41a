"""The worker's side of a step's sandbox: what the agent reaches through listening sockets the
worker serves. The agent runs in a network namespace where only loopback exists; the worker
binds listening sockets inside it and serves them from its own event loop. Through them the agent
reaches its step's credential proxy, an egress proxy that opens only the hosts the step's
descriptor allows (``network={"allow": [...]}``; :mod:`jigs.sandbox._egress`), and relays to the
MCP servers the step declares on the worker's loopback (:mod:`jigs.sandbox._relay`). The servers
here know nothing of namespaces: each is handed an already-listening socket and serves it until
cancelled.
"""

from __future__ import annotations

__all__: list[str] = []
