//! Laws of the TCP receiver that mutation testing found unpinned (docs/testing.md,
//! session 6). A child module of `receiver` (declared there with `#[path]`), in its own
//! file. Every truth is a literal worked out by hand from the RFC or Linux rule named.

use super::*;
use crate::tcp::test_io::Harness;
use sojourn_experiment::transport::CcKind;

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

fn sack_blocks(p: &Packet) -> Vec<(u64, u64)> {
    (0..p.hdr.sack_count as usize)
        .map(|i| {
            let b = p.hdr.sack(i);
            (b.start, b.end)
        })
        .collect()
}

/// RFC 2018 §4: the first SACK block holds the newest segment, and a block swallowed by
/// a newer one is not repeated. The option costs 2 NOPs + 2 + 8 bytes per block (Linux
/// `TCPOLEN_SACK_BASE_ALIGNED` 4 + `TCPOLEN_SACK_PERBLOCK` 8): a 66-B ACK frame grows to
/// 78 B with one block and 86 B with two.
#[test]
fn sack_blocks_newest_first_merged_and_sized() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let t = Time(MS);
    r.on_packet(&seg(1, t), &mut h.io(t));
    r.on_packet(&seg(3, t), &mut h.io(t));
    r.on_packet(&seg(2, t), &mut h.io(t));
    let b = |i: u64, j: u64| (1 + i * MSS, 1 + j * MSS);
    let blocks: Vec<Vec<(u64, u64)>> = h.out.iter().map(sack_blocks).collect();
    assert_eq!(
        blocks,
        vec![vec![b(1, 2)], vec![b(3, 4), b(1, 2)], vec![b(1, 4)]],
        "segment 2 fills the gap between the two blocks: one block remains"
    );
    let lens: Vec<u32> = h.out.iter().map(|p| p.len_bytes).collect();
    assert_eq!(lens, vec![78, 86, 78]);
}

/// RFC 2883 §4 (D-SACK): a segment that arrives again above a hole is reported in the
/// first block, followed by the block that holds it.
#[test]
fn a_duplicate_above_the_hole_is_reported_by_dsack() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let t = Time(MS);
    r.on_packet(&seg(1, t), &mut h.io(t));
    r.on_packet(&seg(1, t), &mut h.io(t));
    let b1 = (1 + MSS, 1 + 2 * MSS);
    assert_eq!(sack_blocks(&h.out[1]), vec![b1, b1]);
    assert_eq!(r.dup_segments, 1);
}

/// RFC 3168 §6.1.3 (classic ECN, not DCTCP): after a CE-marked segment every ACK carries
/// ECE until a segment with CWR arrives; a later unmarked segment does not clear it.
#[test]
fn classic_ecn_echoes_ce_until_cwr() {
    let mut h = Harness::new();
    let mut r = receiver(TcpConfig {
        ecn: true,
        cc: CcKind::NewReno,
        ..cfg()
    });
    let t = Time(MS);
    let mut s0 = seg(0, t);
    s0.ecn = sojourn_core::Ecn::Ce;
    let mut s2 = seg(2, t);
    s2.hdr.flags |= tcp_flags::CWR;
    for p in [&s0, &seg(1, t), &s2, &seg(3, t)] {
        r.on_packet(p, &mut h.io(t));
    }
    let ece: Vec<bool> = h
        .out
        .iter()
        .map(|p| p.hdr.flags & tcp_flags::ECE != 0)
        .collect();
    assert_eq!(ece, vec![true, true, false, false]);
}

/// Linux `tcp_event_data_recv`: data after an idle gap *longer* than the RTO (here the
/// initial 1 s) puts the receiver back into quick-ACK mode; a gap of exactly 1 s does not,
/// and the lone segment waits for the delayed ACK.
#[test]
fn quick_ack_mode_returns_only_after_more_than_an_rto_of_silence() {
    for (gap_ns, immediate) in [(1_000_000_000u64, false), (1_000_000_001, true)] {
        let mut h = Harness::new();
        let mut r = receiver(TcpConfig {
            delayed_ack: true,
            ..cfg()
        });
        let t = Time(MS);
        // 16 quick ACKs (TCP_MAX_QUICKACKS) spend the budget; the 17th segment waits.
        for i in 0..17 {
            r.on_packet(&seg(i, t), &mut h.io(t));
        }
        assert_eq!(h.take().len(), 16);
        let d = r.deadline().unwrap();
        r.on_timer(&mut h.io(d));
        assert_eq!(h.take().len(), 1, "the delayed ACK");
        let t2 = Time(t.0 + gap_ns);
        r.on_packet(&seg(17, t2), &mut h.io(t2));
        assert_eq!(h.take().len(), immediate as usize, "gap {gap_ns} ns");
    }
}

/// RFC 2018 §4: the SACK blocks report the data still held above the cumulative ACK.
/// Segments 1 and 3 arrive above a hole; segment 0 fills it up to 2: the ACK of 2897
/// still reports segment 3.
#[test]
fn sack_blocks_above_the_new_cumulative_ack_remain() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let t = Time(MS);
    for i in [1, 3, 0] {
        r.on_packet(&seg(i, t), &mut h.io(t));
    }
    let last = h.out.last().unwrap();
    assert_eq!(last.hdr.ack, 1 + 2 * MSS);
    assert_eq!(sack_blocks(last), vec![(1 + 3 * MSS, 1 + 4 * MSS)]);
}

fn handshake_cfg() -> TcpConfig {
    TcpConfig {
        handshake: true,
        delayed_ack: true,
        ..cfg()
    }
}

/// Opens a handshake receiver: SYN at 10 ms (SYN-ACK with TSval 10 ms), the third step's
/// ACK at `ack_at` echoing 10 ms.
fn open(r: &mut TcpReceiver, h: &mut Harness, ack_at: Time) {
    let mut syn = Packet::default();
    syn.hdr.flags = tcp_flags::SYN;
    r.on_packet(&syn, &mut h.io(Time(10 * MS)));
    assert_eq!(h.take().len(), 1, "SYN-ACK");
    let mut a = Packet::default();
    a.hdr.seq = 1;
    a.hdr.flags = tcp_flags::ACK;
    a.hdr.ts_ecr = Time(10 * MS);
    r.on_packet(&a, &mut h.io(ack_at));
}

/// RFC 9293 §3.10.7.4 (SYN-RECEIVED): a segment without ACK is dropped: no ACK, no data.
#[test]
fn a_segment_without_ack_does_not_complete_the_handshake() {
    let mut h = Harness::new();
    let mut r = receiver(handshake_cfg());
    let mut syn = Packet::default();
    syn.hdr.flags = tcp_flags::SYN;
    r.on_packet(&syn, &mut h.io(Time(10 * MS)));
    h.take();
    let mut p = seg(0, Time(20 * MS));
    p.hdr.flags = 0;
    r.on_packet(&p, &mut h.io(Time(20 * MS)));
    assert!(h.take().is_empty());
    assert_eq!(r.rcv_nxt, 1);
}

/// The passive side's RTO from the SYN-ACK's round trip (RFC 6298 §2.2 with Linux's
/// 200-ms floor on the variance term): R = 150 ms gives SRTT + max(4·R/2, 200 ms) =
/// 450 ms. It decides when quick-ACK mode comes back (`tcp_event_data_recv`: idle > RTO):
/// not after exactly 450 ms, after 450 ms + 1 ns. The delayed ACK waits
/// `delack_min` = 40 ms.
#[test]
fn the_passive_rto_comes_from_the_syn_ack_round_trip() {
    for (gap_ns, immediate) in [(450 * MS, false), (450 * MS + 1, true)] {
        let mut h = Harness::new();
        let mut r = receiver(handshake_cfg());
        open(&mut r, &mut h, Time(160 * MS));
        let t = Time(200 * MS);
        for i in 0..17 {
            r.on_packet(&seg(i, t), &mut h.io(t));
        }
        assert_eq!(h.take().len(), 16, "16 quick ACKs");
        assert_eq!(r.deadline(), Some(Time(240 * MS)), "delack 40 ms");
        r.on_timer(&mut h.io(Time(240 * MS)));
        assert_eq!(h.take().len(), 1);
        let t2 = Time(t.0 + gap_ns);
        r.on_packet(&seg(17, t2), &mut h.io(t2));
        assert_eq!(h.take().len(), immediate as usize, "gap {gap_ns} ns");
    }
}

/// A retransmitted bare FIN (after the FIN was received) is acknowledged again (ACK 1450:
/// 1448 bytes + the FIN) without a SACK block: it carries no data, and a SACK block is
/// never empty (RFC 2018 §3: left edge < right edge).
#[test]
fn a_repeated_bare_fin_is_acked_without_a_sack_block() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let t = Time(MS);
    r.on_packet(&seg(0, t), &mut h.io(t));
    let mut fin = Packet::default();
    fin.hdr.seq = 1 + MSS;
    fin.hdr.flags = tcp_flags::ACK | tcp_flags::FIN;
    r.on_packet(&fin, &mut h.io(t));
    r.on_packet(&fin, &mut h.io(Time(2 * MS)));
    let acks: Vec<(u64, u8)> = h
        .out
        .iter()
        .map(|p| (p.hdr.ack, p.hdr.sack_count))
        .collect();
    assert_eq!(acks, vec![(1 + MSS, 0), (2 + MSS, 0), (2 + MSS, 0)]);
}

/// RFC 9293 §3.10.7.4 (TIME-WAIT): the only thing that can arrive is a retransmission of
/// the remote FIN: acknowledge it and restart the 2·MSL timeout. sojourn's finished
/// receiver stands in for it with Linux's `TCP_TIMEWAIT_LEN` (60 s, include/net/tcp.h):
/// the FIN at 1 s closes the receiver at 61 s; a retransmitted FIN at 30 s moves that to
/// 90 s, and the receiver reports itself closed then, not before.
#[test]
fn a_finished_receiver_lingers_60_s_and_a_retransmitted_fin_restarts_it() {
    let mut h = Harness::new();
    let mut r = receiver(cfg());
    let mut fin = seg(0, Time(MS));
    fin.hdr.flags |= tcp_flags::FIN;
    r.on_packet(&fin, &mut h.io(Time(1_000 * MS)));
    assert_eq!(r.deadline(), Some(Time(61_000 * MS)));
    r.on_packet(&fin, &mut h.io(Time(30_000 * MS)));
    assert_eq!(r.deadline(), Some(Time(90_000 * MS)));
    r.on_timer(&mut h.io(Time(89_999 * MS)));
    assert!(!h.notes.iter().any(|n| matches!(n, Note::Closed)));
    r.on_timer(&mut h.io(Time(90_000 * MS)));
    assert!(h.notes.iter().any(|n| matches!(n, Note::Closed)));
}
