# Receiver for sender_side.sh: counts bytes per connection, prints the time of the last one.
import socket, time, threading, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.0.2", 5001)); s.listen(16)
def serve(c, a):
    n = 0
    while True:
        d = c.recv(1 << 20)
        if not d: break
        n += len(d); last = time.monotonic()
    print(f"conn {a[1]} bytes {n} last {last:.6f}", flush=True)
    c.close()
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
