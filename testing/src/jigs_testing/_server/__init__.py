"""The scripted loopback model server behind :mod:`jigs_testing` (private: import from there).

One job per module: ``replies`` (what to answer), ``script`` and ``script_file`` (the queue and
its file format), ``record`` (the request log entry), ``state`` (the logs, thread-safe),
``routing`` (path suffix -> API), ``http`` and ``connection`` (HTTP/1.1 with h11), ``app``
(answering one request), ``wire_anthropic``, ``wire_responses`` and ``wire_chat`` (each API's
shapes), ``respond`` (sending, streaming, cutting), ``server`` (``ModelServer``), ``cli``
(``jigs model-server``) and ``pytest_fixture``.
"""
