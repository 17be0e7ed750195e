//! The sender's quiet-ACK path (`TcpSender::on_quiet_ack`, issue 19 session 9) against
//! the general one (`TcpSender::on_ack_general`): two senders, one taking ACKs through
//! `on_packet` (the quiet path wherever it applies), the other through the general path
//! only, are driven by the same ACKs of a toy network (a serialising link with random
//! loss, reordering and CE marks towards a real `TcpReceiver`, ACKs back with random
//! loss) and must send the same packets, leave the same notes and hold the same state
//! after every call. A child module of `sender` (declared there with `#[path]`) so that
//! it sees the sender's state; every loop is bounded.

use super::*;
use crate::tcp::receiver::TcpReceiver;
use crate::tcp::test_io::Harness;
use sojourn_core::packet::SackBlock;

const MS: u64 = 1_000_000;

/// Everything the sender holds that ACK processing may change, as text.
fn snapshot(s: &TcpSender) -> String {
    format!(
        "state {:?} una {} nxt {} write_end {} fin {} {} high {} cs {:?} rtt {:?} \
         prr {} {} {} rwnd {} rto {:?} tlp {:?} next_tx {:?} tlp_high {:?} {} \
         rate {:?} {:?} {} ecn {} cwr {} ts {:?} dup {} retx_hint {} usage {} pace {} \
         below {} tsq {} {:?} {} last_tx {:?} last_skb {} defers {} {} counters {} {} {} {} {} \
         sb {:?} {} {} {} {} {} deadline {:?}",
        s.state,
        s.snd_una,
        s.snd_nxt,
        s.write_end,
        s.fin_wanted,
        s.fin_sent,
        s.high_seq,
        s.cs,
        s.rtt,
        s.prr_delivered,
        s.prr_out,
        s.prior_cwnd,
        s.peer_rwnd,
        s.rto_at,
        s.tlp_at,
        s.next_tx_at,
        s.tlp_high_seq,
        s.tlp_retrans,
        s.delivered_at,
        s.first_tx_at,
        s.app_limited_until,
        s.ecn_ok,
        s.send_cwr,
        s.ts_recent,
        s.dupacks,
        s.retx_hint,
        s.cwnd_usage_seq,
        s.pace_blocked,
        s.bytes_below,
        s.tsq_throttled,
        s.tsq_wake,
        s.tsq_throttles,
        s.last_tx_at,
        s.last_skb_start,
        s.tso_defers,
        s.tso_deferred_cwnd_limited,
        s.retransmits,
        s.rtos,
        s.tlps,
        s.spurious_dsacks,
        s.data_pkts_sent,
        segs_digest(s),
        s.sb.packets_out(),
        s.sb.sacked_out,
        s.sb.lost_out,
        s.sb.retrans_out,
        s.sb.highest_sack,
        s.deadline(),
    )
}

/// The retransmission queue's entries, every field, folded into one number (formatting
/// them at every step would dominate the test's time).
fn segs_digest(s: &TcpSender) -> u64 {
    s.sb.segs.iter().fold(s.sb.segs.len() as u64, |h, e| {
        [
            e.start,
            e.len as u64,
            e.pcount as u64,
            e.flags as u64,
            e.sent_at.0,
            e.delivered,
            e.delivered_at.0,
            e.first_tx_at.0,
            e.app_limited as u64,
        ]
        .into_iter()
        .fold(h, |h, x| {
            sojourn_core::rng::splitmix64_mix(h ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        })
    })
}

/// The segments of a (GSO) buffer as they leave a device: `gso_segs` packets of
/// `gso_size` payload bytes, the FIN on the last.
fn segments(p: &Packet) -> Vec<Packet> {
    if p.gso_segs <= 1 {
        return vec![*p];
    }
    let n = p.gso_segs as u32;
    let size = p.gso_size as u32;
    let mut out = Vec::new();
    let mut left = p.hdr.payload_bytes;
    for k in 0..n {
        let mut q = *p;
        q.gso_segs = 1;
        q.hdr.seq = p.hdr.seq + (k * size) as u64;
        q.hdr.payload_bytes = left.min(size);
        left -= q.hdr.payload_bytes;
        if k + 1 < n {
            q.hdr.flags &= !tcp_flags::FIN;
        }
        out.push(q);
    }
    out
}

#[derive(Default)]
struct Counts {
    quiet: u64,
    general: u64,
    /// Receiver: plain next segments, other packets, quiet ACKs, other ACKs.
    plain: u64,
    other: u64,
    quiet_acks: u64,
    other_acks: u64,
}

/// The next `(time, index)` in `v` (earliest time, then earliest queued).
fn earliest(v: &[(Time, Packet)]) -> Option<(Time, usize)> {
    v.iter()
        .enumerate()
        .min_by_key(|(i, (t, _))| (*t, *i))
        .map(|(i, (t, _))| (*t, i))
}

fn run_case(case: u64, counts: &mut Counts) {
    let mut rng = Rng::stream(case, "quiet-ack", 0);
    let ccs = [
        CcKind::Cubic,
        CcKind::NewReno,
        CcKind::Dctcp,
        CcKind::Bbr,
        CcKind::Vegas,
        CcKind::Prague,
    ];
    let cc = ccs[rng.below(ccs.len() as u64) as usize];
    let cfg = TcpConfig {
        cc,
        handshake: rng.chance(0.5),
        ecn: rng.chance(0.5),
        accecn: rng.chance(0.2),
        sack: rng.chance(0.85),
        gso: rng.chance(0.6),
        tsq: rng.chance(0.5),
        pacing: rng.chance(0.3),
        tlp: rng.chance(0.8),
        delayed_ack: rng.chance(0.8),
        dupthresh: [3, 3, 3, 1, 0][rng.below(5) as usize],
        ..TcpConfig::default()
    };
    let size = 20_000 + rng.below(3_000_000);
    let source = || {
        if case.is_multiple_of(5) {
            Source::Bulk
        } else {
            Source::Sized(size)
        }
    };
    let delay = Duration(50_000 + rng.below(5 * MS));
    let loss = [0.0, 0.0, 0.003, 0.02, 0.08][rng.below(5) as usize];
    let ack_loss = [0.0, 0.0, 0.01, 0.05][rng.below(4) as usize];
    let ce = if cfg.ecn || cfg.accecn {
        [0.0, 0.02, 0.2][rng.below(3) as usize]
    } else {
        0.0
    };
    let reorder = [0.0, 0.01, 0.05][rng.below(3) as usize];
    // 10 Mbit/s .. 10 Gbit/s: ns per byte.
    let ns_per_byte = [1u64, 8, 80, 800][rng.below(4) as usize] as f64 / 10.0;

    let (mut ha, mut hb, mut hr) = (Harness::new(), Harness::new(), Harness::new());
    let mut hg = Harness::new();
    let mut a = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &cfg, source(), 7);
    let mut b = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &cfg, source(), 7);
    let rsize = if case.is_multiple_of(3) { 0 } else { size };
    let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, rsize);
    // The receiver's twin: every packet and ACK through the general path.
    let mut g = TcpReceiver::new(0, FlowKey::default(), 0, &cfg, rsize);
    g.general_only = true;
    a.start(&mut ha.io(Time::ZERO));
    b.start(&mut hb.io(Time::ZERO));

    let mut data: Vec<(Time, Packet)> = Vec::new();
    let mut acks: Vec<(Time, Packet)> = Vec::new();
    let mut done: Vec<(Time, Packet)> = Vec::new();
    let mut link_free = Time::ZERO;
    let mut now = Time::ZERO;
    for step in 0..4000u32 {
        // Both senders' output and notes must be the same; it enters the network.
        let out_a: Vec<String> = ha.out.iter().map(|p| format!("{p:?}")).collect();
        let out_b: Vec<String> = hb.out.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(out_a, out_b, "case {case} step {step}: packets differ");
        assert_eq!(ha.notes, hb.notes, "case {case} step {step}: notes differ");
        assert_eq!(snapshot(&a), snapshot(&b), "case {case} step {step}: state");
        // The receiver's cached quiet flag (its fast path's gate) is its state's, and its
        // fast paths did what the general ones did in its twin.
        assert!(r.quiet_flag_is_exact(), "case {case} step {step}: receiver");
        let out_r: Vec<String> = hr.out.iter().map(|p| format!("{p:?}")).collect();
        let out_g: Vec<String> = hg.out.iter().map(|p| format!("{p:?}")).collect();
        assert_eq!(
            out_r, out_g,
            "case {case} step {step}: receiver packets differ"
        );
        assert_eq!(
            hr.notes, hg.notes,
            "case {case} step {step}: receiver notes"
        );
        assert_eq!(
            hr.flows.get(0).delivered_bytes,
            hg.flows.get(0).delivered_bytes,
            "case {case} step {step}: delivered"
        );
        assert_eq!(
            r.snapshot(),
            g.snapshot(),
            "case {case} step {step}: receiver"
        );
        hg.out.clear();
        hg.notes.clear();
        hb.out.clear();
        let closed = ha.notes.contains(&Note::Closed);
        ha.notes.clear();
        hb.notes.clear();
        if closed {
            break;
        }
        for p in ha.take() {
            let start = link_free.max(now);
            let end = start + Duration((p.len_bytes as f64 * ns_per_byte) as u64 + 1);
            link_free = end;
            if p.sk != 0 {
                done.push((end, p));
            }
            for mut q in segments(&p) {
                if rng.chance(loss) {
                    continue;
                }
                if q.ecn != Ecn::NotEct && rng.chance(ce) {
                    q.ecn = Ecn::Ce;
                }
                let extra = if rng.chance(reorder) { delay.0 / 2 } else { 0 };
                data.push((end + delay + Duration(extra), q));
            }
        }
        for p in hr.take() {
            if !rng.chance(ack_loss) {
                acks.push((now + delay, p));
            }
        }
        hr.notes.clear();
        // The next thing to happen.
        let cands = [
            earliest(&data).map(|(t, i)| (t, 0, i)),
            earliest(&acks).map(|(t, i)| (t, 1, i)),
            earliest(&done).map(|(t, i)| (t, 2, i)),
            a.deadline().map(|t| (t, 3, 0)),
            r.deadline().map(|t| (t, 4, 0)),
        ];
        let Some((t, what, i)) = cands.into_iter().flatten().min() else {
            break;
        };
        now = now.max(t);
        match what {
            0 => {
                let (_, p) = data.remove(i);
                let plain = r.takes_plain(&p, now);
                counts.plain += plain as u64;
                counts.other += !plain as u64;
                r.on_packet(&p, &mut hr.io(now));
                g.on_packet(&p, &mut hg.io(now));
            }
            1 => {
                let (_, p) = acks.remove(i);
                if a.state == ConnState::Established {
                    if a.ack_is_quiet(&p.hdr) {
                        counts.quiet += 1;
                    } else {
                        counts.general += 1;
                    }
                    b.on_ack_general(&p, &mut hb.io(now));
                } else {
                    b.on_packet(&p, &mut hb.io(now));
                }
                a.on_packet(&p, &mut ha.io(now));
            }
            2 => {
                let (_, p) = done.remove(i);
                a.on_tx_complete(&p, &mut ha.io(now));
                b.on_tx_complete(&p, &mut hb.io(now));
            }
            3 => {
                a.on_timer(&mut ha.io(now));
                b.on_timer(&mut hb.io(now));
            }
            _ => {
                r.on_timer(&mut hr.io(now));
                g.on_timer(&mut hg.io(now));
            }
        }
    }
    assert_eq!(g.quiet_acks, 0, "case {case}: the twin sent a quiet ACK");
    counts.quiet_acks += r.quiet_acks;
    counts.other_acks += r.acks_sent - r.quiet_acks;
}

/// The quiet path is exact: over 200 random connections (every congestion control,
/// with and without SACK, ECN, AccECN, GSO, TSQ, pacing, TLP, delayed ACKs, with loss,
/// reordering, CE marks and lost ACKs) it sends what the general path sends and leaves
/// the same state, and both paths were taken many times.
#[test]
fn quiet_ack_path_matches_the_general_one() {
    let mut counts = Counts::default();
    for case in 0..200 {
        run_case(case, &mut counts);
    }
    assert!(counts.quiet > 10_000, "quiet ACKs: {}", counts.quiet);
    assert!(counts.general > 10_000, "general ACKs: {}", counts.general);
    // The receiver's fast paths too (its twin takes every packet through the general one).
    assert!(counts.plain > 10_000, "plain segments: {}", counts.plain);
    assert!(counts.other > 10_000, "other segments: {}", counts.other);
    assert!(
        counts.quiet_acks > 10_000,
        "quiet ACKs: {}",
        counts.quiet_acks
    );
    assert!(
        counts.other_acks > 1_000,
        "other ACKs: {}",
        counts.other_acks
    );
}

/// Literal truths for a quiet ACK (RFC 5681 §3.1, RFC 6298 §2.2 / §5.3, RFC 7323 §4.1):
/// IW 10 segments; the ACK of the first two, 10 ms after they left, grows a slow-start
/// cwnd by the two segments (12), takes the first RTT sample (SRTT 10 ms, RTTVAR 5 ms),
/// restarts the RTO at now + SRTT + max(4·RTTVAR, RTO_min 200 ms) = 10 + 210 ms, and two
/// more segments go out (12 in flight).
#[test]
fn a_quiet_ack_follows_the_rfcs_literally() {
    let mut h = Harness::new();
    let cfg = TcpConfig {
        handshake: false,
        cc: CcKind::NewReno,
        gso: false,
        tsq: false,
        ..TcpConfig::default()
    };
    let mut s = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &cfg, Source::Bulk, 1);
    s.start(&mut h.io(Time::ZERO));
    assert_eq!(h.take().len(), 10);
    let mut p = Packet::default();
    p.hdr.ack = 1 + 2 * 1448;
    p.hdr.window = 1 << 30;
    p.hdr.flags = tcp_flags::ACK;
    assert!(s.ack_is_quiet(&p.hdr));
    let t = Time(10 * MS);
    s.on_packet(&p, &mut h.io(t));
    assert_eq!(s.snd_una, 2897);
    assert_eq!(s.cs.cwnd, 12);
    assert_eq!(s.rtt.srtt_ns, 10 * MS);
    assert_eq!(s.rtt.rttvar_ns, 5 * MS);
    assert_eq!(s.rto_at, Some(Time(220 * MS)));
    let out = h.take();
    assert_eq!(out.len(), 4, "cwnd 12 − 8 in flight");
    assert_eq!(out[0].hdr.seq, 1 + 10 * 1448);
    // A SACK block makes the next ACK a general one (RFC 6675 scoreboard).
    p.hdr.ack = 1 + 3 * 1448;
    p.hdr.set_sack(
        0,
        SackBlock {
            start: 1 + 4 * 1448,
            end: 1 + 5 * 1448,
        },
    );
    p.hdr.sack_count = 1;
    assert!(!s.ack_is_quiet(&p.hdr));
}
