"""Local ports for the multi-worker tests' TF_CONFIG clusters."""

import socket

# What a worker prints when its port was taken between `free_ports` closing
# it and the worker's gRPC server binding it (another process may grab a
# free port in that window: rare, but not impossible on a busy machine).
PORT_TAKEN = ("Address already in use", "Could not start gRPC server")


def free_ports(n):
    """`n` ports free on 127.0.0.1 a moment ago (bound, read, released)."""
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports
