"""Experiment texts shared by the live tests (emulate with sojourn's forwarder, and --kernel):
seed 000's mechanism at 10 Mbit/s, a bulk flow in pfifo_fast's band 1 and short Poisson flows."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def can_make_namespaces() -> bool:
    """Root and a working `ip netns`: what a live emulation needs."""
    if os.geteuid() != 0:
        return False
    return subprocess.run(["ip", "netns", "list"], capture_output=True).returncode == 0


#: Marks a test that creates network namespaces (CI runs as root, so it runs there).
live = pytest.mark.skipif(not can_make_namespaces(), reason="live emulation needs root and `ip netns` (CI runs as root)")

AGE = """
duration = "4s"
[topology]
kind = "graph"
nodes = ["client", "server"]
[[topology.links]]
name = "nic"
from = "client"
to = "server"
rate = "10Mbit"
delay = "1ms"
qdisc = "pfifo_fast"
[transport]
cc = "cubic"
[[workload]]
kind = "bulk"
from = "client"
to = "server"
[[workload]]
kind = "poisson"
from = "client"
to = "server"
interval = "150ms"
size = "15KB"
start = "1s"
"""

CLASSIFIER = """
[[classifier]]
at = "client"
hook = "output"
map = [{ upto = 100000, priority = "1:6" }, { priority = "1:0" }]
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def upload_scripts(addr: str, nbytes: int = 300_000) -> tuple[str, str]:
    """Python programs for one TCP upload of `nbytes` to `addr`:5201 (run each in its
    namespace): the server prints "ready", then the byte count it received."""
    server = f"""
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(({addr!r}, 5201)); s.listen(1); s.settimeout(10)
print("ready", flush=True)
c, _ = s.accept(); c.settimeout(10); n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
print(n, flush=True)
"""
    client = f"""
import socket
c = socket.create_connection(({addr!r}, 5201), timeout=10)
c.sendall(b"x" * {nbytes}); c.close()
"""
    return server, client
