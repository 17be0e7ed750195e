//! Laws of the TCP receiver that mutation testing found unpinned (docs/testing.md,
//! session 6). A child module of `receiver` (declared there with `#[path]`), in its own
//! file. Every truth is a literal worked out by hand from the RFC or Linux rule named.

use super::*;
use crate::tcp::test_io::Harness;

const MSS: u64 = 1448;
const MS: u64 = 1_000_000;

/// Segment `i` (0-based) of 1448 B, sent with TSval `ts`.
fn seg(i: u64, ts: Time) -> Packet {
    let mut p = Packet::default();
    p.hdr.seq = 1 + i * MSS;
    p.hdr.payload_bytes = MSS as u32;
    p.hdr.flags = tcp_flags::ACK;
    p.hdr.ts_val = ts;
    p
}

fn receiver(cfg: TcpConfig) -> TcpReceiver {
    TcpReceiver::new(0, FlowKey::default(), 0, &cfg, 0)
}

fn cfg() -> TcpConfig {
    TcpConfig {
        handshake: false,
        rwnd_bytes: 100_000,
        delayed_ack: false,
        ..TcpConfig::default()
    }
}

/// The receive model of docs/transport.md ("Receiver"): the application reads in-order
/// bytes at once, so the advertised window is `rwnd` minus the bytes held out of order
/// (out-of-order data occupies the receive buffer until the hole is filled, as Linux
/// charges its out-of-order queue to the socket's receive memory): 100 000 B, then 98 552
/// and 97 104 with one and two segments held above a hole, 100 000 again once it is
/// filled.
#[test]
fn out_of_order_data_shrinks_the_advertised_window() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let t = Time(MS);
    r.on_packet(&seg(1, t), &mut h.io(t));
    r.on_packet(&seg(2, t), &mut h.io(t));
    r.on_packet(&seg(0, t), &mut h.io(t));
    let got: Vec<(u64, u32)> = h.out.iter().map(|p| (p.hdr.ack, p.hdr.window)).collect();
    assert_eq!(
        got,
        vec![(1, 98_552), (1, 97_104), (1 + 3 * MSS, 100_000)],
        "(ack, window) of each ACK"
    );
}

/// RFC 7323 §3.2 / §4.3: an ACK carries TSval = the receiver's clock when it is sent (here
/// 7 ms) and TSecr = the TSval of the segment that advanced the window (3 ms).
#[test]
fn an_ack_carries_the_send_time_and_echoes_the_data_timestamp() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    r.on_packet(&seg(0, Time(3 * MS)), &mut h.io(Time(7 * MS)));
    assert_eq!(h.out.len(), 1);
    assert_eq!(h.out[0].hdr.ts_val, Time(7 * MS));
    assert_eq!(h.out[0].hdr.ts_ecr, Time(3 * MS));
}
