# Sender for sender_side.sh: a CUBIC bulk flow, a 500-kB transfer 2 s in; samples tc and ss.
import socket, time, threading, subprocess, sys, re, json, os
CC, DUR, SIZE, START = "cubic", 3.0, 500_000, 2.0
def conn():
    c = socket.socket(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, CC.encode()); return c
stop = False
def bulk():
    c = conn(); c.connect(("10.0.0.2", 5001)); buf = b"x" * (1 << 16)
    while not stop: c.send(buf)
    c.close()
t0 = time.monotonic(); th = threading.Thread(target=bulk); th.start()
samples = []
def sampler():
    while not stop:
        q = subprocess.run(["tc", "-s", "qdisc", "show", "dev", os.environ.get("DEV0", "v0")], capture_output=True, text=True).stdout
        ss = subprocess.run(["ss", "-tinm", "state", "established", "dst", "10.0.0.2"], capture_output=True, text=True).stdout
        samples.append((time.monotonic() - t0, q, ss)); time.sleep(0.05)
sp = threading.Thread(target=sampler); sp.start()
time.sleep(START)
c = conn(); ts = time.monotonic(); c.connect(("10.0.0.2", 5001)); c.sendall(b"y" * SIZE); c.close()
time.sleep(DUR - START); stop = True; th.join(); sp.join()
bl = []
for t, q, ss in samples:
    if 1.0 < t < START:
        m = re.findall(r"qdisc pfifo_fast 10:.*?backlog (\d+)b (\d+)p", q, re.S)
        cw = re.findall(r"cwnd:(\d+)", ss); rtt = re.findall(r" rtt:([\d.]+)", ss)
        if m: bl.append((int(m[0][0]), int(m[0][1]), cw, rtt))
# Timeline of the bulk flow (the first connection ss lists): t, backlog bytes/packets,
# cwnd, unacked, rtt, skmem t (sk_wmem_alloc), pacing rate.
tl = []
for t, q, ss in samples:
    m = re.findall(r"qdisc pfifo_fast 10:.*?backlog (\d+)b (\d+)p", q, re.S)
    g = lambda pat: (re.findall(pat, ss) or ["-"])[0]
    tl.append((round(t, 2), *(m[0] if m else ("-", "-")), g(r"cwnd:(\d+)"), g(r"unacked:(\d+)"),
               g(r" rtt:([\d.]+)"), g(r"skmem:\(r\d+,rb\d+,t(\d+)"), g(r"pacing_rate (\S+)")))
last_ss = [ss for t, q, ss in samples if t < START][-1]
print(json.dumps({"short_start": ts, "bulk_before": bl, "timeline": tl, "last_ss": last_ss}))
