"""The sandbox's first command when the worker cannot enter its network namespace (not root).

Run inside the sandbox as ``python -I -S _bridge.py CHANNEL_FD PORT... -- COMMAND...``: makes a
socket listening on ``127.0.0.1:PORT`` for each port (in the sandbox's network namespace, where
this process lives), sends their descriptors to the worker over the inherited ``AF_UNIX``
``SOCK_SEQPACKET`` socket ``CHANNEL_FD`` (one ``b"ok"`` message carrying them, SCM_RIGHTS),
closes every descriptor it made or inherited for this, and executes ``COMMAND`` in its place
(the command, ``timeout 0 CLI ...``, becomes the sandbox's first process, as without a bridge).
On failure it sends ``b"error: ..."`` instead and exits 1 without running the command.

It imports only modules built into the interpreter or compiled (``_socket``, ``posix``,
``sys``): with ``-I -S`` (no site, no environment, no user paths) the interpreter starts in a
few milliseconds and reads nothing the sandbox does not show (this file and the interpreter's
own installation, which the worker exposes read-only for the launch). Not part of the jigs
package at run time: the worker never imports it.
"""

import _socket
import posix
import sys


def _listen(port: int) -> "_socket.socket":
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)  # close-on-exec by default
    try:
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(_socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def _hand_over(channel: "_socket.socket", ports: "list[int]") -> bool:
    """Send the listening sockets (or the error that stopped it); True when sent."""
    made: list[_socket.socket] = []
    try:
        for port in ports:
            made.append(_listen(port))
        fds = b"".join(s.fileno().to_bytes(4, sys.byteorder) for s in made)
        channel.sendmsg([b"ok"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        return True
    except OSError as exc:
        channel.send(f"error: listening on 127.0.0.1 in the sandbox: {exc}".encode()[:4000])
        return False
    finally:
        for sock in made:  # the worker holds its own copies now; the command gets none
            sock.close()


def main(argv: "list[str]") -> int:
    split = argv.index("--")
    channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, int(argv[1]))
    try:
        sent = _hand_over(channel, [int(p) for p in argv[2:split]])
    finally:
        channel.close()
    if not sent:
        return 1
    command = argv[split + 1 :]
    try:
        posix.execv(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"jigs sandbox bridge: cannot run {command[0]}: {exc}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv))
