# A user-space delay line for bench/linux (the kernel here has no netem): an L2 bridge
# between two interfaces of one namespace that holds every frame `delay_ms` before passing
# it on. The rate is shaped by the interfaces' own qdiscs (HTB), not here.
#
#   ip netns exec NS python3 delay_line.py IF_A IF_B DELAY_MS SECONDS
#
# Bounded: exits after SECONDS. Frames are whole MTU frames (the end hosts run with
# TSO/GSO/GRO and tx checksumming off, so no partial checksums cross it).
import heapq
import select
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_IGNORE_OUTGOING = 23


def bind(ifname: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(263, PACKET_IGNORE_OUTGOING, 1)  # SOL_PACKET: not our own sends
    s.bind((ifname, 0))
    s.setblocking(False)
    return s


def main() -> None:
    a_name, b_name, delay_ms, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    a, b = bind(a_name), bind(b_name)
    peer = {a.fileno(): b, b.fileno(): a}
    delay_ns = int(delay_ms * 1e6)
    end = time.monotonic_ns() + int(seconds * 1e9)
    held: list[tuple[int, int, bytes, socket.socket]] = []
    seq = 0
    print("ready", flush=True)
    while (now := time.monotonic_ns()) < end:
        while held and held[0][0] <= now:
            _, _, frame, out = heapq.heappop(held)
            out.send(frame)
        wait_s = 0.05 if not held else max(0.0, (held[0][0] - now) / 1e9)
        ready, _, _ = select.select([a, b], [], [], wait_s)  # µs timeout, unlike poll's ms
        for src in ready:
            fd = src.fileno()
            while True:
                try:
                    frame = src.recv(65536)
                except BlockingIOError:
                    break
                seq += 1
                heapq.heappush(held, (time.monotonic_ns() + delay_ns, seq, frame, peer[fd]))


if __name__ == "__main__":
    main()
