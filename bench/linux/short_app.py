# Applications for short_flow.sh: `recv PORT SIZE` serves one connection, prints when the last
# byte arrived and closes; `send SIZE CC PORT` connects, writes SIZE bytes, closes and prints its times.
# Times are CLOCK_MONOTONIC (one clock for every namespace of the machine).
import json
import socket
import sys
import time

if sys.argv[1] == "recv":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.9.0.2", int(sys.argv[2])))
    s.listen(1)
    s.settimeout(10)
    print("ready", flush=True)
    size = int(sys.argv[3])
    c, _ = s.accept()
    n, last = 0, 0.0
    while n < size and (d := c.recv(1 << 20)):
        n += len(d)
        last = time.monotonic()
    c.close()  # after the last byte: the sender stays ESTABLISHED (traced) until here
    print(json.dumps({"bytes": n, "last": last}), flush=True)
else:
    size, cc, port = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    c = socket.socket()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    got = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    t_connect = time.monotonic()
    c.connect(("10.9.0.2", port))
    t_established = time.monotonic()
    c.sendall(b"x" * size)
    c.recv(1)  # wait for the receiver's close: no FIN from us before every byte is ACKed
    c.close()
    print(json.dumps({"cc": got, "connect": t_connect, "established": t_established}), flush=True)
