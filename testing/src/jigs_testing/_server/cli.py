"""``jigs model-server``: serve a script file until SIGINT or SIGTERM.

Prints the base URL (``http://127.0.0.1:PORT``) as the only line on stdout, flushed as soon as
the server is listening, and logs one line per request on stderr (header values never appear).
Exit codes: 0 after SIGINT/SIGTERM, 1 if the server cannot listen (e.g. the port is taken), 2
for a bad command line or script file.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path

import anyio

from .logline import logger
from .replies import Reply
from .script_file import ScriptError, load_script
from .server import ModelServer

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jigs model-server",
        description=(
            "Serve a scripted fake model API (Anthropic Messages, OpenAI Responses and Chat "
            "Completions) on the loopback interface. Prints the base URL on stdout."
        ),
    )
    parser.add_argument(
        "--script",
        type=Path,
        help=(
            "JSON or YAML list of replies, one per model request (default: none, and every "
            "model request gets a 400 saying so)"
        ),
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="ID",
        help="a model id for GET /v1/models (repeatable; default: fake-model)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=1000,
        metavar="N",
        help="keep the newest N requests in memory (default: 1000; the server may run for days)",
    )
    return parser


async def _serve(replies: list[Reply], host: str, port: int, models: list[str], keep: int) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with ModelServer(replies, host=host, port=port, models=models, keep=keep) as server:
            try:
                print(server.url, flush=True)
            except (BrokenPipeError, ValueError):
                logger.warning("stdout is closed; the URL is %s", server.url)
            logger.info(
                "ANTHROPIC_BASE_URL=%s  OpenAI base_url=%s  HTTPS_PROXY=%s  (%d replies)",
                server.anthropic_base_url,
                server.openai_base_url,
                server.proxy_url,
                len(replies),
            )
            async for signum in signals:
                logger.info("stopping on %s", signal.Signals(signum).name)
                break
            attempts = len(server.connect_attempts) + len(server.proxy_requests)
            logger.info(
                "served %d requests, %d of %d replies used, %d outside attempts refused",
                server.served,
                server.script.used,
                len(server.script),
                attempts,
            )


def main(argv: list[str] | None = None) -> int:
    """Run ``jigs model-server [--script FILE] [--port N] [--host ADDR] [--model ID]...``."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    if args.keep < 1:
        print("jigs model-server: --keep must be at least 1", file=sys.stderr)
        return 2
    try:
        replies = load_script(args.script) if args.script is not None else []
    except ScriptError as exc:
        print(f"jigs model-server: {exc}", file=sys.stderr)
        return 2

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("model-server: %(message)s"))
    previous_level, previous_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    # this handler prints every line; the root's (jigs' own CLI configures one) must not too
    logger.propagate = False
    try:
        anyio.run(_serve, replies, args.host, args.port, list(args.model), args.keep)
    except OSError as exc:
        print(
            f"jigs model-server: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr
        )
        return 1
    except KeyboardInterrupt:  # SIGINT before the signal receiver was in place
        return 0
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
        logger.propagate = previous_propagate
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
