"""The credential proxy: the step's model endpoint on the worker's loopback.

Its modules, each for one job:

- ``_credential``: :class:`~jigs.proxy._credential.CredentialProxy`, its face and lifecycle;
  ``_sockets``: the listening sockets it serves (``add_socket`` included); ``_serving``: its
  connections while it serves, each request refused or handed to the relay;
- ``_routes``: which requests go upstream (the step token, the traversal check, the model-only
  allowlist, the budget gate) and each head rewritten both ways (the key set, the secrets
  masked);
- ``_relay``: bodies and streams relayed both ways through ``_upstream``'s httpcore pool;
- ``_accounting`` (with ``_usage``): every forwarded request recorded, its token usage read,
  and the step's ledger and budget gate;
- ``_endpoint``: one step's proxy on the process's proxy thread, as the step's model endpoint;
- ``_http1``: the one HTTP/1.1 server layer (over h11) that this proxy, the sandbox's egress
  proxy and ``jigs_testing``'s model server speak.

Nothing here is public API: the modules are imported by path, so importing one part (the
ledger, the HTTP layer) loads no more than it needs.
"""
