"""`python -I -S tests/forked_cli_client.py SOCKET ARGS...`: run `launcher ARGS...` as a child
of the fork server at SOCKET (tests/forked_cli.py) with this process's stdin, stdout,
stderr, environment, working directory and umask, and exit as it exits. Stdlib only, and
started without site: it must cost next to nothing."""

import json
import os
import signal
import socket
import sys


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    umask = os.umask(0)
    os.umask(umask)
    call = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    socket.send_fds(conn, [json.dumps(call).encode() + b"\n"], [0, 1, 2])
    reader = conn.makefile("rb")
    child = json.loads(reader.readline())["pid"]

    def relay(sig, _frame):
        try:
            os.kill(child, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, relay)
    line = reader.readline()
    if not line:
        sys.exit(1)
    status = json.loads(line)["status"]
    if status < 0:  # killed by a signal: die of the same one, as the caller would have seen
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    sys.exit(status)


main()
