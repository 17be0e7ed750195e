# Sender for cwnd_timeline.sh: one CUBIC bulk flow for SECS seconds to 10.0.0.2:5001, a UDP
# ping to 10.0.0.2:5002 every 0.2 s (64-B payload, the same pfifo_fast band as the flow),
# and the qdisc's backlog from `tc -s` every 0.1 s. Prints one JSON object. SNDBUF=BYTES fixes
# the socket's send buffer (SO_SNDBUF, which turns autotuning off): a buffer of seconds
# keeps the write queue from draining when this process pauses.
import json, os, re, socket, subprocess, threading, time

SECS = float(os.environ.get("SECS", "30"))
DEV0 = os.environ["DEV0"]
stop = threading.Event()
t0 = time.monotonic()


def bulk():
    c = socket.socket()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")
    if os.environ.get("SNDBUF"):
        c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(os.environ["SNDBUF"]))
    c.connect(("10.0.0.2", 5001))
    buf = b"x" * (1 << 16)
    while not stop.is_set():
        c.send(buf)
    c.close()


pings = []


def pinger():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.settimeout(1.0)
    n = 0
    while not stop.is_set() and n < int(SECS / 0.2) + 5:
        ts = time.monotonic()
        u.sendto(n.to_bytes(8, "big") + b"p" * 56, ("10.0.0.2", 5002))
        try:
            d, _ = u.recvfrom(128)
            pings.append((round(ts - t0, 3), (time.monotonic() - ts) * 1e3))
        except socket.timeout:
            pings.append((round(ts - t0, 3), None))
        n += 1
        time.sleep(max(0.0, 0.2 - (time.monotonic() - ts)))


backlog = []


def sampler():
    while not stop.is_set():
        q = subprocess.run(["tc", "-s", "qdisc", "show", "dev", DEV0],
                           capture_output=True, text=True).stdout
        m = re.findall(r"qdisc pfifo_fast 10:.*?backlog (\d+)b (\d+)p", q, re.S)
        if m:
            backlog.append((round(time.monotonic() - t0, 3), int(m[0][1])))
        stop.wait(0.1)


threads = [threading.Thread(target=f) for f in (bulk, pinger, sampler)]
for t in threads:
    t.start()
stop.wait(SECS)
stop.set()
for t in threads:
    t.join()
print(json.dumps({"t0_monotonic": t0, "pings": pings, "backlog": backlog}))
