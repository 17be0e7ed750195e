# Receiver for cwnd_timeline.sh: reads the bulk flow on 10.0.0.2:5001 as fast as it is woken
# (1-MB reads, like iperf3's), echoes the UDP pings on :5002. Runs until killed.
import socket, threading

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("10.0.0.2", 5002))


def echo():
    while True:
        d, a = u.recvfrom(2048)
        u.sendto(d, a)


threading.Thread(target=echo, daemon=True).start()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.0.0.2", 5001))
s.listen(4)
while True:
    c, _ = s.accept()
    while c.recv(1 << 20):
        pass
    c.close()
