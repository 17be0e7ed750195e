//! Laws of the TCP sender that mutation testing found unpinned (docs/testing.md, session
//! 6). A child module of `sender` (declared there with `#[path]`) so that it sees the
//! sender's state, kept in its own file so that it does not interleave with the sender's
//! code. Every truth is a literal: an RFC 9293 / Linux rule worked out by hand for the
//! segments of the test.

use super::*;
use crate::tcp::test_io::Harness;
use sojourn_core::packet::SackBlock;

const MSS: u64 = 1448;
const MS: u64 = 1_000_000;

/// Per-segment mechanics: no handshake, no TSQ (the harness never completes a
/// transmission), no GSO, NewReno.
fn cfg() -> TcpConfig {
    TcpConfig {
        handshake: false,
        cc: CcKind::NewReno,
        tsq: false,
        gso: false,
        ..TcpConfig::default()
    }
}

fn start(cfg: TcpConfig, source: Source, h: &mut Harness) -> TcpSender {
    let mut s = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &cfg, source, 1);
    s.start(&mut h.io(Time::ZERO));
    s
}

fn ack(ack: u64, sack: &[(u64, u64)]) -> Packet {
    let mut p = Packet::default();
    p.hdr.ack = ack;
    p.hdr.window = 1 << 30;
    p.hdr.flags = tcp_flags::ACK;
    for (i, &(a, b)) in sack.iter().enumerate() {
        p.hdr.set_sack(i, SackBlock { start: a, end: b });
    }
    p.hdr.sack_count = sack.len() as u8;
    p
}

fn messages(size: u32, every_ms: u64, stop_ms: u64) -> Source {
    Source::Messages {
        size,
        interval: IntervalDist::Fixed(Duration(every_ms * MS)),
        next_at: Time::ZERO,
        stop: Time(stop_ms * MS),
        rng: Rng::stream(1, "test", 0),
    }
}

/// A 3000-byte write: segments of 1448, 1448 and 104 bytes at sequence 1, 1449 and 2897.
/// Only the segment that empties the write queue carries PSH (Linux `tcp_push` marks the
/// tail skb of a write; RFC 9293 §3.9.1), and the FIN rides on it exactly once
/// (`tcp_send_fin` piggybacks on the last queued skb), taking one sequence number.
#[test]
fn a_sized_write_pushes_and_finishes_on_its_last_segment_only() {
    let mut h = Harness::new();
    let s = start(cfg(), Source::Sized(3000), &mut h);
    let out = h.take();
    let seqs: Vec<u64> = out.iter().map(|p| p.hdr.seq).collect();
    assert_eq!(seqs, vec![1, 1449, 2897]);
    let payload: Vec<u32> = out.iter().map(|p| p.hdr.payload_bytes).collect();
    assert_eq!(payload, vec![1448, 1448, 104]);
    let flags: Vec<u8> = out.iter().map(|p| p.hdr.flags).collect();
    let (a, p, f) = (tcp_flags::ACK, tcp_flags::PSH, tcp_flags::FIN);
    assert_eq!(flags, vec![a, a, a | p | f]);
    assert_eq!(s.snd_nxt, 3002, "1 + 3000 bytes + the FIN");
}

/// RFC 9293 §3.8.6: never send beyond SND.UNA + SND.WND. A peer window of exactly four
/// segments (5792 B) lets four of the initial window's ten out.
#[test]
fn the_receive_window_caps_the_initial_window() {
    let mut h = Harness::new();
    let s = start(
        TcpConfig {
            rwnd_bytes: 4 * MSS,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    let out = h.take();
    assert_eq!(out.len(), 4);
    assert_eq!(s.snd_nxt, 1 + 4 * MSS);
}

/// A sender that paces itself stamps each packet with the time it released it (Linux
/// EDT, `skb->tstamp`, ≥ 4.20), so sch_fq does not pace it a second time; time 0 means
/// "no timestamp", so a packet released at 0 carries 1 ns. An unpaced sender leaves the
/// stamp empty.
#[test]
fn a_pacing_sender_stamps_the_release_time_on_its_packets() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            cc: CcKind::Bbr,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    let first = h.take();
    assert!(!first.is_empty());
    assert!(first.iter().all(|p| p.departure_at == Time(1)));
    // BBR paces the initial window (330.9 Mbit/s before an RTT sample): the rest leaves
    // from the pacing timer; released at 5 ms, stamped 5 ms.
    s.on_timer(&mut h.io(Time(5 * MS)));
    let later = h.take();
    assert!(!later.is_empty(), "the paced rest of the window");
    assert!(later.iter().all(|p| p.departure_at == Time(5 * MS)));

    let mut h = Harness::new();
    start(cfg(), Source::Bulk, &mut h);
    let out = h.take();
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|p| p.departure_at == Time::ZERO));
}

/// A thin stream (1000-B messages every 10 ms until 25 ms): the sender wakes at 10 ms and
/// 20 ms for the next message and then no more; each message is pushed. The first message
/// leaves the write queue empty with room in the window, so the sender is
/// application-limited (`tcp_rate_check_app_limited`: app_limited = delivered + in flight
/// = 0 + 1) and the next message's segment is marked app-limited for its rate sample.
#[test]
fn a_thin_stream_wakes_per_message_and_is_application_limited() {
    let mut h = Harness::new();
    let mut s = start(cfg(), messages(1000, 10, 25), &mut h);
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].hdr.payload_bytes, 1000);
    assert_eq!(out[0].hdr.flags, tcp_flags::ACK | tcp_flags::PSH);
    assert_eq!(h.flows.get(0).first_byte, Some(Time::ZERO));
    assert_eq!(s.deadline(), Some(Time(10 * MS)), "the next message");
    s.on_timer(&mut h.io(Time(10 * MS)));
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].hdr.seq, 1001);
    assert!(
        s.sb.segs.back().unwrap().app_limited,
        "sent while application-limited"
    );
    assert_eq!(s.deadline(), Some(Time(20 * MS)));
    s.on_timer(&mut h.io(Time(20 * MS)));
    assert_eq!(h.take().len(), 1);
    // The message due at 30 ms is past the stop: the next wake-up is a timer of the
    // connection (loss probe or RTO), not 30 ms.
    assert_ne!(s.deadline(), Some(Time(30 * MS)));
    s.on_timer(&mut h.io(Time(30 * MS)));
    assert!(h.take().is_empty(), "no message at 30 ms");
}

/// A bulk sender is never application-limited: the segments it sends on the first ACK are
/// cwnd-limited, not app-limited (Linux clears the initial app-limited mark at the first
/// ACK and a full write queue never sets it again).
#[test]
fn a_bulk_sender_is_not_application_limited() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    assert_eq!(h.take().len(), 10);
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(40 * MS)));
    assert_eq!(
        h.take().len(),
        2,
        "slow start: one ACKed segment, two new ones"
    );
    assert!(s.sb.segs.iter().all(|g| !g.app_limited));
}

/// A message source whose stop has passed before the connection opens writes nothing:
/// the flow has no first byte (flows' `first_byte_s` stays empty).
#[test]
fn nothing_written_means_no_first_byte() {
    let mut h = Harness::new();
    start(cfg(), messages(1000, 10, 0), &mut h);
    assert!(h.take().is_empty());
    assert_eq!(h.flows.get(0).first_byte, None);
}

/// RFC 8985 §7.3 / Linux `tcp_send_loss_probe`: the probe sends a new segment if there is
/// unsent data (ignoring cwnd), not a retransmission. IW 10 out, the first ACK at 40 ms
/// (SRTT 40 ms) lets two more out (segments up to 1 + 12·1448); the probe, due at
/// 40 + 2·40 + 2 = 122 ms (two packets or more out), sends segment 13 at 17 377.
#[test]
fn the_loss_probe_sends_new_data_when_there_is_some() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    h.take();
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(40 * MS)));
    assert_eq!(h.take().len(), 2);
    assert_eq!(s.deadline(), Some(Time(122 * MS)), "PTO = 2·SRTT + 2 ms");
    s.on_timer(&mut h.io(Time(122 * MS)));
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].hdr.seq, 1 + 12 * MSS);
    assert_eq!((s.tlps, s.retransmits), (1, 0));
}

/// RFC 8985 §7 (Linux `tcp_schedule_loss_probe`: `!tcp_is_sack(tp)` → no probe): without
/// SACK no loss probe is armed; the RTO is the only timer.
#[test]
fn no_loss_probe_without_sack() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            sack: false,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    h.take();
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(40 * MS)));
    assert_eq!(s.tlp_at, None);
    assert_eq!(s.deadline(), s.rto_at);
}

/// Linux 6.18 `tcp_cwnd_reduction` (PRR, RFC 6937, as changed by "tcp: improve PRR loss
/// recovery", Linux 5.19) once pipe is at or below ssthresh: sndcnt = min(ssthresh − pipe,
/// max(prr_delivered − prr_out, newly delivered) + 1), the + 1 only when snd_una advanced
/// and the ACK reported no new loss. IW 10; one ACK SACKs segments 8–10: segments 1–7 are
/// lost (three SACKed above each, RFC 6675), pipe 10 − 3 − 7 = 0, ssthresh 5,
/// prr_delivered 3: sndcnt = min(5, 3) = 3 (new losses, no + 1): cwnd 3, three
/// retransmissions. The next ACK acknowledges segment 1 (snd_una advances, no new loss):
/// pipe 9 − 3 − 6 + 2 = 2, prr_delivered 4, prr_out 3: sndcnt = min(3, max(1, 1) + 1) = 2,
/// cwnd 4, segments 4 and 5 resent.
#[test]
fn prr_below_ssthresh_adds_one_only_when_una_advances_without_new_loss() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    h.take();
    let sacked = [(1 + 7 * MSS, 1 + 10 * MSS)];
    s.on_packet(&ack(1, &sacked), &mut h.io(Time(40 * MS)));
    assert_eq!(s.ca_state(), CaState::Recovery);
    assert_eq!(s.cs.ssthresh, 5);
    let seqs: Vec<u64> = h.take().iter().map(|p| p.hdr.seq).collect();
    assert_eq!(seqs, vec![1, 1 + MSS, 1 + 2 * MSS]);
    assert_eq!(s.cs.cwnd, 3);
    s.on_packet(&ack(1 + MSS, &sacked), &mut h.io(Time(41 * MS)));
    let seqs: Vec<u64> = h.take().iter().map(|p| p.hdr.seq).collect();
    assert_eq!(seqs, vec![1 + 3 * MSS, 1 + 4 * MSS]);
    assert_eq!(s.cs.cwnd, 4);
}

/// The same rule when snd_una does not advance and no loss is new: no + 1 (Linux 6.18 adds
/// it only for `FLAG_SND_UNA_ADVANCED && !newly_lost`). After the two ACKs above (segments
/// 1–5 retransmitted, prr_out 5, prr_delivered 4), an ACK that only SACKs segment 3's
/// retransmission: pipe 9 − 4 SACKed − 5 lost + 3 retransmitted = 3, prr_delivered 5:
/// sndcnt = min(5 − 3, max(5 − 5, 1)) = 1, cwnd 4, segment 6 resent, not 6 and 7.
#[test]
fn prr_below_ssthresh_adds_nothing_when_una_stands_still() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    h.take();
    let sacked = [(1 + 7 * MSS, 1 + 10 * MSS)];
    s.on_packet(&ack(1, &sacked), &mut h.io(Time(40 * MS)));
    s.on_packet(&ack(1 + MSS, &sacked), &mut h.io(Time(41 * MS)));
    assert_eq!(h.take().len(), 5, "segments 1-3, then 4 and 5");
    let more = [(1 + 2 * MSS, 1 + 3 * MSS), (1 + 7 * MSS, 1 + 10 * MSS)];
    s.on_packet(&ack(1 + MSS, &more), &mut h.io(Time(42 * MS)));
    let seqs: Vec<u64> = h.take().iter().map(|p| p.hdr.seq).collect();
    assert_eq!(seqs, vec![1 + 5 * MSS]);
    assert_eq!(s.cs.cwnd, 4);
}

/// RFC 9293 §3.10.7.4: an ACK of data not yet sent (SEG.ACK > SND.NXT) is dropped, and an
/// old one (SEG.ACK < SND.UNA) is ignored: neither moves snd_una or sends anything.
#[test]
fn acks_beyond_snd_nxt_or_below_snd_una_are_ignored() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    h.take();
    s.on_packet(&ack(1 + 20 * MSS, &[]), &mut h.io(Time(40 * MS)));
    assert_eq!((s.snd_una, s.snd_nxt), (1, 1 + 10 * MSS));
    assert!(h.take().is_empty());
    s.on_packet(&ack(1 + 2 * MSS, &[]), &mut h.io(Time(41 * MS)));
    assert_eq!(s.snd_una, 1 + 2 * MSS);
    h.take();
    let cwnd = s.cs.cwnd;
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(42 * MS)));
    assert_eq!((s.snd_una, s.cs.cwnd), (1 + 2 * MSS, cwnd));
    assert!(h.take().is_empty());
}

/// Karn (RFC 6298 §3) with timestamps (RFC 7323 §4): an ACK of a retransmitted segment
/// gives an RTT sample only through the timestamp it echoes; TSecr 0 is no echo (Linux
/// `tcp_ack_update_rtt` needs `rcv_tsecr` non-zero). The RTO at 1 s resends segment 1;
/// its ACK at 1.1 s echoing 1 s measures 100 ms; the same ACK without an echo, nothing.
#[test]
fn a_retransmission_is_timed_only_by_a_timestamp_echo() {
    for (ts_ecr, srtt_ns) in [(Time(1_000 * MS)), Time::ZERO]
        .into_iter()
        .zip([Some(100 * MS), None])
    {
        let mut h = Harness::new();
        let mut s = start(cfg(), Source::Bulk, &mut h);
        h.take();
        s.on_timer(&mut h.io(Time(1_000 * MS)));
        let out = h.take();
        assert_eq!(
            (out.len(), out[0].hdr.seq),
            (1, 1),
            "the RTO resends the head"
        );
        let mut a = ack(1 + MSS, &[]);
        a.hdr.ts_ecr = ts_ecr;
        s.on_packet(&a, &mut h.io(Time(1_100 * MS)));
        assert_eq!(
            s.rtt.has_sample().then_some(s.rtt.srtt_ns),
            srtt_ns,
            "TSecr {ts_ecr:?}"
        );
    }
}

/// Linux `tcp_rate_gen`: the application-limited mark is cleared only when `delivered`
/// has passed it (`after()`, strict). Two-segment messages every 10 ms: the first leaves
/// the queue empty (mark = 0 delivered + 2 in flight = 2); an ACK of segment 1 with a
/// one-segment window (mark 1 + 1 = 2) keeps message 2 (written at 10 ms) unsent; the ACK
/// of segment 2 at 15 ms opens two segments: delivered = 2 is not past 2, so message 2's
/// segments are sent still marked application-limited.
#[test]
fn the_app_limited_mark_clears_only_once_delivered_passes_it() {
    let mut h = Harness::new();
    let mut s = start(cfg(), messages(2 * MSS as u32, 10, 100), &mut h);
    assert_eq!(h.take().len(), 2);
    let mut a = ack(1 + MSS, &[]);
    a.hdr.window = MSS as u32;
    s.on_packet(&a, &mut h.io(Time(5 * MS)));
    assert!(h.take().is_empty());
    s.on_timer(&mut h.io(Time(10 * MS)));
    assert!(h.take().is_empty(), "the receive window is closed");
    let mut a = ack(1 + 2 * MSS, &[]);
    a.hdr.window = 2 * MSS as u32;
    s.on_packet(&a, &mut h.io(Time(15 * MS)));
    let seqs: Vec<u64> = h.take().iter().map(|p| p.hdr.seq).collect();
    assert_eq!(seqs, vec![1 + 2 * MSS, 1 + 3 * MSS]);
    assert!(s.sb.segs.iter().all(|g| g.app_limited));
}

/// RFC 3168 §6.1.2 without SACK: an ECE answers with one window reduction (CWR) and no
/// retransmission; the ACKs that follow inside the reduced window are not NewReno partial
/// ACKs (those exist only in Recovery, RFC 6582).
#[test]
fn ece_without_sack_reduces_the_window_but_retransmits_nothing() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            sack: false,
            ecn: true,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    h.take();
    let mut a = ack(1 + MSS, &[]);
    a.hdr.flags |= tcp_flags::ECE;
    s.on_packet(&a, &mut h.io(Time(40 * MS)));
    assert_eq!(s.ca_state(), CaState::Cwr);
    for k in 2..=4u64 {
        s.on_packet(&ack(1 + k * MSS, &[]), &mut h.io(Time((40 + k) * MS)));
    }
    assert_eq!(s.retransmits, 0);
    assert!(
        h.take().iter().all(|p| p.hdr.seq > 10 * MSS),
        "new data only"
    );
}

/// Linux `tcp_process_tlp_ack`: an ACK of exactly `tlp_high_seq` after a retransmitting
/// probe is no evidence of a loss (only an ACK *beyond* it is): no window reduction.
/// A 10-segment transfer, the first ACK at 40 ms, the probe at 122 ms resends the last
/// segment; the ACK of everything at 130 ms leaves ssthresh untouched.
#[test]
fn an_ack_of_exactly_the_probe_point_does_not_reduce_the_window() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Sized(10 * MSS), &mut h);
    assert_eq!(h.take().len(), 10);
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(40 * MS)));
    s.on_timer(&mut h.io(Time(122 * MS)));
    let out = h.take();
    assert_eq!(
        (out.len(), out[0].hdr.seq),
        (1, 1 + 9 * MSS),
        "probe: the last segment"
    );
    let end = s.snd_nxt;
    s.on_packet(&ack(end, &[]), &mut h.io(Time(130 * MS)));
    assert_eq!(s.cs.ssthresh, INFINITE_SSTHRESH);
    assert_eq!(s.ca_state(), CaState::Open);
}

/// RFC 9293 §3.10.7.3 (SYN-SENT): only a segment with both SYN and ACK opens the
/// connection; a bare ACK does not.
#[test]
fn only_a_syn_ack_opens_the_connection() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            handshake: true,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    assert_eq!(h.take().len(), 1, "the SYN");
    s.on_packet(&ack(1, &[]), &mut h.io(Time(10 * MS)));
    assert_eq!(s.state, ConnState::SynSent);
    assert!(h.take().is_empty());
    let mut synack = ack(1, &[]);
    synack.hdr.flags |= tcp_flags::SYN;
    s.on_packet(&synack, &mut h.io(Time(20 * MS)));
    assert_eq!(s.state, ConnState::Established);
    assert_eq!(h.take().len(), 10);
}

/// RFC 6298 §5.5 / Linux: the SYN's retransmission timer doubles from the initial 1 s:
/// resent at 1 s, 3 s and 7 s.
#[test]
fn the_syn_timer_doubles() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            handshake: true,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    h.take();
    let mut times = vec![];
    for _ in 0..3 {
        let t = s.deadline().unwrap();
        times.push(t.0 / MS);
        s.on_timer(&mut h.io(t));
        assert_eq!(h.take()[0].hdr.flags & tcp_flags::SYN, tcp_flags::SYN);
    }
    assert_eq!(times, vec![1_000, 3_000, 7_000]);
}

/// The `ssthresh_bytes` series exists only once ssthresh is set (Linux `ss` shows no
/// ssthresh while it is `TCP_INFINITE_SSTHRESH`): none in the initial slow start; after
/// the SACK loss of segment 1 (IW 10, NewReno) 5 × 1448 = 7240 B.
#[test]
fn ssthresh_is_observed_only_once_set() {
    let mut h = Harness::new();
    let mut s = start(cfg(), Source::Bulk, &mut h);
    h.take();
    let ssthresh = |s: &TcpSender| {
        let mut v = None;
        s.observe(&mut |k, x| {
            if k == "ssthresh_bytes" {
                v = Some(x)
            }
        });
        v
    };
    assert_eq!(ssthresh(&s), None);
    s.on_packet(&ack(1, &[(1 + MSS, 1 + 4 * MSS)]), &mut h.io(Time(40 * MS)));
    assert_eq!(s.ca_state(), CaState::Recovery);
    assert_eq!(ssthresh(&s), Some(7240.0));
}

/// GSO on, a thin stream whose messages are 11 or 12 segments: the initial window sends
/// two 5-segment buffers and leaves the tail of the message (1 or 2 segments) in the
/// write queue; the ACK of segment 1 (cwnd 11, two segments free) decides whether the
/// tail goes at once. Linux `tcp_write_xmit` asks `tcp_tso_should_defer` only for a
/// buffer of more than one segment; `tcp_tso_should_defer` sends at once when the last
/// transmission is *more* than 1 ms old (`delta > 0`), else defers a buffer that fills
/// the cwnd quota (cong_win ≤ skb len) unless a third of the window is free
/// (`tcp_tso_win_divisor` 3: 2 free of 11 is not) or the next ACK is due in less than
/// SRTT/2.
fn gso_tail_after_the_first_ack(message_segs: u64, ack_at: Time) -> (usize, u64) {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig { gso: true, ..cfg() },
        messages((message_segs * MSS) as u32, 100, 1_000),
        &mut h,
    );
    let first: Vec<u16> = h.take().iter().map(|p| p.gso_segs).collect();
    assert_eq!(first, vec![5, 5]);
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(ack_at));
    let segs = h.take().iter().map(|p| p.gso_segs.max(1) as usize).sum();
    (segs, s.tso_defers)
}

#[test]
fn a_one_segment_tail_is_never_deferred() {
    // SRTT 0.5 ms, ACK 0.5 ms after the last transmission: the one-segment tail goes.
    assert_eq!(gso_tail_after_the_first_ack(11, Time(MS / 2)), (1, 0));
}

#[test]
fn a_two_segment_tail_is_deferred_until_the_last_send_is_more_than_1_ms_old() {
    // SRTT 1 ms, ACK exactly 1 ms after the last transmission: deferred.
    assert_eq!(gso_tail_after_the_first_ack(12, Time(MS)), (0, 1));
}

// ----- session 7: the survivors session 6 left open (docs/testing.md) -----

/// RFC 9293 §3.10.7.3 (SYN-SENT): a SYN without ACK is a simultaneous open; the
/// connection moves to SYN-RECEIVED, not ESTABLISHED, and no data may be sent until the
/// peer acknowledges our SYN. (sojourn's peer is always a passive receiver, so sojourn
/// ignores the bare SYN instead of entering SYN-RECEIVED; either way nothing is sent.)
#[test]
fn a_bare_syn_does_not_open_the_connection() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            handshake: true,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    assert_eq!(h.take().len(), 1, "our SYN");
    let mut syn = ack(0, &[]);
    syn.hdr.flags = tcp_flags::SYN;
    s.on_packet(&syn, &mut h.io(Time(10 * MS)));
    assert_eq!(s.state, ConnState::SynSent);
    assert!(
        h.take().is_empty(),
        "no data before our SYN is acknowledged"
    );
}

/// Linux `tcp_write_xmit` consults TCP Small Queues (`tcp_small_queue_check`, the only
/// place that sets `TSQ_THROTTLED`) for an skb it is about to send: with the write queue
/// empty there is no skb, so an idle socket is never throttled, however many of its bytes
/// sit below TCP. A 10-segment transfer (all of it, FIN included, in the initial window,
/// 10 × 2280 B of truesize in the host queue); the ACK of segment 1 at 100 ms finds
/// nothing left to send.
#[test]
fn nothing_left_to_send_is_never_tsq_throttled() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig { tsq: true, ..cfg() },
        Source::Sized(10 * MSS),
        &mut h,
    );
    assert_eq!(h.take().len(), 10);
    assert_eq!(s.bytes_below, 10 * 2280);
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(100 * MS)));
    assert!(h.take().is_empty());
    assert!(!s.tsq_throttled, "nothing to send, nothing to throttle");
}

/// Linux `tcp_tso_should_defer` for a buffer that is *not* the write queue's tail (a bulk
/// write leaves 64-KB buffers behind it): "middle in queue won't get any more data" sends
/// it at once only if it fits the window (limit ≥ skb len); a 45-segment buffer with 2
/// segments of cwnd free does not, so the other rules decide. GSO, bulk, IW 10 in two
/// 5-segment buffers; the ACK of segment 1 at 1 ms (SRTT 1 ms, the last send 1 ms ago,
/// not more): cwnd 11, 2 free < 43 (the autosized `max_segs`), 2 free < 11/3, the head
/// (segment 2, sent at 0) left more than SRTT/2 ago, cong_win (2 segments) < send_win and
/// ≤ the buffer: deferred, cwnd-limited. Nothing is sent.
#[test]
fn a_buffer_in_the_middle_of_the_queue_waits_for_a_bigger_quota() {
    let mut h = Harness::new();
    let mut s = start(TcpConfig { gso: true, ..cfg() }, Source::Bulk, &mut h);
    let first: Vec<u16> = h.take().iter().map(|p| p.gso_segs).collect();
    assert_eq!(first, vec![5, 5]);
    s.on_packet(&ack(1 + MSS, &[]), &mut h.io(Time(MS)));
    assert!(h.take().is_empty(), "deferred");
    assert_eq!(s.tso_defers, 1);
    assert!(s.tso_deferred_cwnd_limited);
}

/// Linux `tcp_write_xmit` grows the head buffer to the cwnd quota (`tcp_grow_skb`, quota
/// = min(cwnd/2, free cwnd, `max_segs`)), even past a `gso_max_size` that holds one
/// segment, because `tcp_tso_autosize` never goes below `tcp_min_tso_segs` = 2. With
/// `gso_max_size` 2000 B (size goal 1448 B) the initial window leaves in five 2-segment
/// buffers. The ACK of segment 1 at 0.5 ms advertises 13 756 B: 724 B of send window
/// left, 2 segments of cwnd (11 − 9) free. The 2-segment buffer is asked
/// `tcp_tso_should_defer`: send_win 724 ≤ 2896 B → deferred (and `tcp_snd_wnd_test` would
/// refuse a segment that does not fit the window anyway): nothing is sent, in
/// particular no 724-B sliver.
#[test]
fn the_head_buffer_grows_to_the_cwnd_quota_past_a_small_gso_max_size() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            gso: true,
            gso_max_bytes: 2000,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    let first: Vec<u16> = h.take().iter().map(|p| p.gso_segs).collect();
    assert_eq!(first, vec![2, 2, 2, 2, 2]);
    let mut a = ack(1 + MSS, &[]);
    a.hdr.window = 13_756;
    s.on_packet(&a, &mut h.io(Time(MS / 2)));
    let sent: Vec<u32> = h.take().iter().map(|p| p.hdr.payload_bytes).collect();
    assert_eq!(sent, Vec::<u32>::new());
    assert_eq!(s.tso_defers, 1);
}

/// Linux `tcp_cwnd_validate` (since 5.19): a new usage window (`cwnd_usage_seq` = snd_nxt,
/// `max_packets_out` = packets_out) starts when snd_una passes the old one's end, on a
/// cwnd-limited send, or when packets_out *exceeds* the window's maximum — not when it
/// only equals it. Bulk sender held by the receive window (never cwnd-limited): IW 6
/// (rwnd 6 segments) → max 6, window end 1 + 6·1448; the ACK of segment 1 (window 6
/// segments) lets segment 7 go: packets_out 6 = max, the window end stays; the ACK of
/// segments 2–6 (window 2 segments) passes it and segment 8 goes: max_packets_out 2,
/// window end 1 + 8·1448.
#[test]
fn equalling_the_windows_max_packets_out_does_not_start_a_new_usage_window() {
    let mut h = Harness::new();
    let mut s = start(
        TcpConfig {
            rwnd_bytes: 6 * MSS,
            ..cfg()
        },
        Source::Bulk,
        &mut h,
    );
    assert_eq!(h.take().len(), 6);
    assert_eq!((s.cs.max_packets_out, s.cwnd_usage_seq), (6, 1 + 6 * MSS));
    let mut a = ack(1 + MSS, &[]);
    a.hdr.window = 6 * MSS as u32;
    s.on_packet(&a, &mut h.io(Time(40 * MS)));
    assert_eq!(h.take().len(), 1);
    assert_eq!((s.cs.max_packets_out, s.cwnd_usage_seq), (6, 1 + 6 * MSS));
    let mut a = ack(1 + 6 * MSS, &[]);
    a.hdr.window = 2 * MSS as u32;
    s.on_packet(&a, &mut h.io(Time(41 * MS)));
    assert_eq!(h.take().len(), 1);
    assert_eq!((s.cs.max_packets_out, s.cwnd_usage_seq), (2, 1 + 8 * MSS));
}
