//! Accurate ECN feedback (AccECN, RFC 9768, formerly draft-ietf-tcpm-accurate-ecn):
//! the negotiation on the handshake, the receiver's counters with the ACE field and the
//! AccECN option, and the sender's decoding of them. `ecn = "accecn"` in `[transport]`.
//!
//! - **Negotiation** (§3.1): the SYN sets AE, CWR and ECE. A receiver with AccECN answers
//!   with a SYN-ACK whose (AE, CWR, ECE) encode the IP-ECN field the SYN arrived with
//!   (Table 3: Not-ECT 0b010, ECT(1) 0b011, ECT(0) 0b100, CE 0b110); a receiver with only
//!   RFC 3168 ECN answers ECE alone (0b001) and the connection falls back to classic ECN;
//!   one without ECN answers 0b000. Table 2's other rows: 0b111 (a broken reflector of the
//!   SYN's flags) means no ECN, 0b101 (reserved) AccECN, as Linux reads them. The two
//!   tables are `sojourn_core::accecn`'s (the live forwarder reads real handshakes with
//!   them).
//! - **Receiver** (§3.2.1): `r.cep` counts CE-marked packets from 5 (so that a zeroed ACE
//!   field betrays a middlebox), `r.ceb`, `r.e0b`, `r.e1b` count payload bytes by IP-ECN
//!   codepoint from 0, 1 and 1 (Linux `TCP_ACCECN_*_INIT_OFFSET`). Every ACK carries ACE =
//!   `r.cep` mod 8 (§3.2.2) and, where it fits in the 40 bytes of TCP options after the
//!   timestamps and SACK blocks, the AccECN option (§3.2.3). An ACK goes out at once when
//!   the CE state of arriving data changes (change-triggered ACKs, §3.2.2.5.1) and when 6 CE
//!   marks await feedback (increment-triggered ACKs, §3.2.2.5.2: at most 7; Linux
//!   `TCP_ACCECN_ACE_MAX_DELTA` = 6).
//! - **Sender** (§3.2.2.2, §3.2.2.5, Appendix A.2): the CE packets an ACK reports are ACE −
//!   `s.cep` mod 8, unless the ACK covers 8 or more packets, when the field may have wrapped:
//!   with the option, the CE bytes it reports pick the wrap count; without it, the sender
//!   takes the safest likely value, the largest count ≤ the packets acknowledged that is
//!   congruent to the delta mod 8.
//!
//! Not modelled: the data sender's own ACE (feedback on the ACK direction, whose packets
//! are Not-ECT here), the third ACK's handshake encoding, ACE and option verification
//! against middlebox mangling (§3.2.2.3, §3.2.3.2), and the option's E0B/E1B fields on the
//! wire (counted by the receiver; no sender here reads them, so only ECEB travels).

use sojourn_core::packet::{tcp_flags, TransportHeader};
use sojourn_core::Ecn;

/// `r.cep`'s initial value (RFC 9768 §3.2.1; Linux `TCP_ACCECN_CEP_INIT_OFFSET`).
pub const CEP_INIT: u64 = 5;
/// `r.e0b` and `r.e1b` start at 1, `r.ceb` at 0 (§3.2.1; Linux `TCP_ACCECN_E0B_INIT_OFFSET`,
/// `TCP_ACCECN_E1B_INIT_OFFSET`, `TCP_ACCECN_CEB_INIT_OFFSET`).
pub const E0B_INIT: u64 = 1;
pub const E1B_INIT: u64 = 1;
/// CE marks awaiting feedback that trigger an immediate ACK (Linux
/// `TCP_ACCECN_ACE_MAX_DELTA`; RFC 9768 §3.2.2.5.2 allows at most 7).
pub const ACE_MAX_DELTA: u32 = 6;
/// The TCP option space (RFC 9293 §3.1: data offset ≤ 15 words).
const TCP_OPTION_SPACE: u32 = 40;

/// The data receiver's AccECN state (RFC 9768 §3.2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccEcnReceiver {
    /// CE-marked packets received, from 5 (`r.cep`).
    pub cep: u64,
    /// Payload bytes received CE (`r.ceb`), ECT(0) (`r.e0b`), ECT(1) (`r.e1b`).
    pub ceb: u64,
    pub e0b: u64,
    pub e1b: u64,
    /// CE marks since the last ACK.
    pending_ce: u32,
    /// The CE state of the latest data packet.
    last_ce: bool,
}

impl Default for AccEcnReceiver {
    fn default() -> AccEcnReceiver {
        AccEcnReceiver {
            cep: CEP_INIT,
            ceb: 0,
            e0b: E0B_INIT,
            e1b: E1B_INIT,
            pending_ce: 0,
            last_ce: false,
        }
    }
}

impl AccEcnReceiver {
    /// Counts an arriving data packet of `segs` wire segments and `payload` bytes; true if
    /// it calls for an immediate ACK (a change of CE state, or [`ACE_MAX_DELTA`] marks
    /// awaiting feedback).
    pub fn on_data(&mut self, ecn: Ecn, payload: u32, segs: u32) -> bool {
        let ce = ecn == Ecn::Ce;
        match ecn {
            Ecn::NotEct => {}
            Ecn::Ect0 => self.e0b += payload as u64,
            Ecn::Ect1 => self.e1b += payload as u64,
            Ecn::Ce => {
                self.ceb += payload as u64;
                self.cep += segs as u64;
                self.pending_ce += segs;
            }
        }
        let changed = ce != self.last_ce;
        self.last_ce = ce;
        changed || self.pending_ce >= ACE_MAX_DELTA
    }

    /// The ACE field of the next ACK: `r.cep` mod 8.
    pub fn ace(&self) -> u8 {
        (self.cep % 8) as u8
    }

    /// Writes the feedback into an outgoing ACK: the ACE field and, if it fits next to the
    /// options already there, the AccECN option. Returns the option's bytes on the wire
    /// (12 for three fields with a NOP, 8 for two, 0 when only one or none would fit: the
    /// first field is E0B or E1B, so ECEB needs two).
    pub fn write_ack(&mut self, h: &mut TransportHeader, timestamps: bool) -> u32 {
        h.set_ace(self.ace());
        self.pending_ce = 0;
        let sack = if h.sack_count > 0 {
            4 + 8 * h.sack_count as u32
        } else {
            0
        };
        let used = if timestamps { 12 } else { 0 } + sack;
        let room = TCP_OPTION_SPACE.saturating_sub(used);
        let bytes = if room >= 12 {
            12
        } else if room >= 8 {
            8
        } else {
            0
        };
        if bytes > 0 {
            h.set_accecn_eceb(self.ceb);
        }
        bytes
    }
}

/// The CE packets an ACK reports (RFC 9768 §3.2.2.5 and Appendix A.2): `delta` is ACE −
/// `s.cep` mod 8, `d_pkt` the packets the ACK newly acknowledges (cumulatively or by
/// SACK), `d_ceb` the CE bytes the AccECN option newly reports, if it came.
///
/// Below 8 packets the field cannot have wrapped: `delta`. Otherwise the candidates are
/// `delta + 8k` up to the safest value `d_pkt − ((d_pkt − delta) mod 8)`; the option's
/// bytes pick the candidate nearest `⌈d_ceb / mss⌉` (no CE bytes: `delta`), and without the
/// option the sender assumes the safest value.
pub fn decode_cep(delta: u8, d_pkt: u64, d_ceb: Option<u64>, mss: u32) -> u64 {
    let delta = (delta & 7) as u64;
    if d_pkt < 8 {
        return delta;
    }
    let safe = d_pkt - (d_pkt - delta) % 8;
    match d_ceb {
        None => safe,
        Some(0) => delta,
        Some(b) => {
            let est = b.div_ceil(mss.max(1) as u64);
            let wraps = (est.saturating_sub(delta) + 4) / 8;
            (delta + 8 * wraps).min(safe)
        }
    }
}

/// The data sender's AccECN state (RFC 9768 §3.2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccEcnSender {
    /// CE packets reported so far, from 5 (`s.cep`).
    pub cep: u64,
    /// CE bytes reported so far by the option (`s.ceb`).
    pub ceb: u64,
}

impl Default for AccEcnSender {
    fn default() -> AccEcnSender {
        AccEcnSender {
            cep: CEP_INIT,
            ceb: 0,
        }
    }
}

impl AccEcnSender {
    /// Reads an ACK's feedback; returns the CE-marked packets it newly reports.
    pub fn on_ack(&mut self, h: &TransportHeader, d_pkt: u64, mss: u32) -> u64 {
        let delta = h.ace().wrapping_sub((self.cep % 8) as u8) & 7;
        let d_ceb = h
            .accecn_eceb()
            .map(|e| (e as u64).wrapping_sub(self.ceb) & 0xff_ffff);
        let d = decode_cep(delta, d_pkt, d_ceb, mss);
        self.cep += d;
        if let Some(b) = d_ceb {
            self.ceb += b;
        }
        d
    }
}

/// The flags of an AccECN SYN: AE, CWR and ECE all set (RFC 9768 §3.1.1).
pub fn set_syn(h: &mut TransportHeader) {
    h.flags |= tcp_flags::ECE | tcp_flags::CWR;
    h.ae = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1448;

    #[test]
    fn receiver_counters_after_a_known_number_of_marks() {
        let mut r = AccEcnReceiver::default();
        // RFC 9768 §3.2.1: r.cep starts at 5 (ACE 0b101), the byte counters at 0/1/1.
        assert_eq!((r.cep, r.ceb, r.e0b, r.e1b), (5, 0, 1, 1));
        assert_eq!(r.ace(), 5);
        for _ in 0..11 {
            r.on_data(Ecn::Ce, 1448, 1);
        }
        // 11 CE packets: r.cep = 16, ACE = (5 + 11) mod 8 = 0; 11·1448 = 15928 CE bytes.
        assert_eq!(r.cep, 16);
        assert_eq!(r.ace(), 0);
        assert_eq!(r.ceb, 15_928);
        r.on_data(Ecn::Ect1, 1000, 1);
        r.on_data(Ecn::Ect0, 500, 1);
        r.on_data(Ecn::NotEct, 700, 1);
        assert_eq!((r.e1b, r.e0b, r.ceb, r.cep), (1001, 501, 15_928, 16));
        // A 3-segment CE buffer counts 3 packets.
        r.on_data(Ecn::Ce, 3 * 1448, 3);
        assert_eq!((r.cep, r.ace()), (19, 3));
    }

    #[test]
    fn change_and_increment_triggered_acks() {
        let mut r = AccEcnReceiver::default();
        let mut h = TransportHeader::default();
        assert!(!r.on_data(Ecn::Ect1, MSS, 1), "no change: may be delayed");
        assert!(r.on_data(Ecn::Ce, MSS, 1), "CE after not-CE: ACK at once");
        assert!(!r.on_data(Ecn::Ce, MSS, 1));
        assert!(r.on_data(Ecn::Ect1, MSS, 1), "not-CE after CE: ACK at once");
        r.write_ack(&mut h, true);
        // A run of CE: the sixth mark awaiting feedback forces an ACK.
        assert!(r.on_data(Ecn::Ce, MSS, 1));
        let forced: Vec<bool> = (0..5).map(|_| r.on_data(Ecn::Ce, MSS, 1)).collect();
        assert_eq!(forced, [false, false, false, false, true]);
        r.write_ack(&mut h, true);
        assert!(
            !r.on_data(Ecn::Ce, MSS, 1),
            "pending count restarts at the ACK"
        );
    }

    #[test]
    fn the_option_goes_where_it_fits() {
        let mut r = AccEcnReceiver::default();
        r.on_data(Ecn::Ce, 100, 1);
        let mut h = TransportHeader::default();
        // 40 − 12 (timestamps) = 28 left: the full option, 11 bytes + NOP.
        assert_eq!(r.write_ack(&mut h, true), 12);
        assert_eq!((h.ace(), h.accecn_eceb()), (6, Some(100)));
        // Two SACK blocks (20 B) leave 8: two fields, ECEB still in.
        let mut h = TransportHeader {
            sack_count: 2,
            ..Default::default()
        };
        assert_eq!(r.write_ack(&mut h, true), 8);
        assert_eq!(h.accecn_eceb(), Some(100));
        // Three blocks (28 B) leave nothing.
        let mut h = TransportHeader {
            sack_count: 3,
            ..Default::default()
        };
        assert_eq!(r.write_ack(&mut h, true), 0);
        assert_eq!(h.accecn_eceb(), None);
        assert_eq!(h.ace(), 6, "ACE is in the header: always there");
        // Without timestamps three blocks leave 12.
        assert_eq!(r.write_ack(&mut h, false), 12);
    }

    #[test]
    fn an_accecn_syn_sets_ae_cwr_and_ece() {
        // The AccECN SYN sets all three flags (RFC 9768 §3.1.1; the SYN-ACK's tables are
        // sojourn_core::accecn's).
        let mut h = TransportHeader::default();
        set_syn(&mut h);
        assert_eq!(h.ace(), 0b111);
    }

    #[test]
    fn decoding_the_wrap() {
        // Fewer than 8 packets acknowledged: the delta itself.
        assert_eq!(decode_cep(3, 7, None, MSS), 3);
        assert_eq!(decode_cep(0, 2, None, MSS), 0);
        // 20 packets, delta 3, no option: the safest likely value 20 − (17 mod 8) = 19.
        assert_eq!(decode_cep(3, 20, None, MSS), 19);
        // 8 packets, delta 0: all 8 may have been CE.
        assert_eq!(decode_cep(0, 8, None, MSS), 8);
        // With the option: 11 packets' worth of CE bytes → 11 (= 3 + 8).
        assert_eq!(decode_cep(3, 20, Some(11 * 1448), MSS), 11);
        // 3 packets' worth → 3; a partial segment rounds up (1449 B → 2 → nearest 3).
        assert_eq!(decode_cep(3, 20, Some(3 * 1448), MSS), 3);
        assert_eq!(decode_cep(3, 20, Some(1449), MSS), 3);
        // No CE bytes at all: the delta.
        assert_eq!(decode_cep(0, 30, Some(0), MSS), 0);
        // The option can never push beyond what was acknowledged: 30 packets' worth of
        // bytes on a 20-packet ACK is capped at 19.
        assert_eq!(decode_cep(3, 20, Some(30 * 1448), MSS), 19);
        // The nearest candidate: 7 packets' worth lies halfway between 3 and 11 and
        // goes to the safer 11; 6 packets' worth is nearer 3.
        assert_eq!(decode_cep(3, 20, Some(7 * 1448), MSS), 11);
        assert_eq!(decode_cep(3, 20, Some(6 * 1448), MSS), 3);
    }

    #[test]
    fn sender_follows_the_receiver_through_wraps() {
        let mut r = AccEcnReceiver::default();
        let mut s = AccEcnSender::default();
        let mut h = TransportHeader::default();
        // 11 CE marks acknowledged 2 packets at a time: ACE wraps once (5 → 0), every
        // ACK is unambiguous, and the sender counts exactly 11 (every other ACK has three
        // SACK blocks and so no option: ACE alone).
        let mut total = 0;
        for i in 0..12 {
            let e = if i < 11 { Ecn::Ce } else { Ecn::Ect1 };
            r.on_data(e, MSS, 1);
            if i % 2 == 1 {
                h = TransportHeader {
                    sack_count: if i % 4 == 1 { 3 } else { 0 },
                    ..Default::default()
                };
                r.write_ack(&mut h, true);
                total += s.on_ack(&h, 2, MSS);
            }
        }
        assert_eq!(total, 11);
        assert_eq!((s.cep, r.cep), (16, 16));
        assert_eq!(
            s.ceb,
            11 * 1448,
            "the last ACK's option brought s.ceb up to date"
        );
        assert_eq!(h.ace(), 0);
        // One ACK for 10 packets of which 9 were CE: ACE moves by 9 ≡ 1. Without the
        // option the sender assumes 9 (10 − (10 − 1) mod 8 = 9); with it, the option's
        // 9·1448 bytes say 9 too. One CE of the 10 with the option: exactly 1.
        let mut r2 = r.clone();
        let mut s2 = s.clone();
        for i in 0..10 {
            r.on_data(if i < 9 { Ecn::Ce } else { Ecn::Ect1 }, MSS, 1);
            r2.on_data(if i == 0 { Ecn::Ce } else { Ecn::Ect1 }, MSS, 1);
        }
        let mut a = TransportHeader::default();
        r.write_ack(&mut a, true);
        assert_eq!(s.clone().on_ack(&a, 10, MSS), 9);
        let mut b = TransportHeader::default();
        r2.write_ack(&mut b, true);
        assert_eq!(s2.on_ack(&b, 10, MSS), 1);
        b.accecn_opt = 0; // the same ACK without its option: the safe guess
        let mut s3 = s.clone();
        assert_eq!(s3.on_ack(&b, 10, MSS), 9);
        // The byte counter wraps at 2^24 on the wire: the sender's delta does not care.
        let mut s4 = AccEcnSender {
            cep: 5,
            ceb: (1 << 24) - 100,
        };
        let mut c = TransportHeader::default();
        c.set_ace(6);
        c.set_accecn_eceb(1348); // (2^24 − 100 + 1448) mod 2^24
        assert_eq!(s4.on_ack(&c, 1, MSS), 1);
        assert_eq!(s4.ceb, (1 << 24) + 1348);
    }

    mod connection {
        //! The sender and the receiver together: negotiation and DCTCP's α from AccECN.
        use crate::endpoint::Endpoint;
        use crate::tcp::cc::{AnyCc, CcKind};
        use crate::tcp::receiver::TcpReceiver;
        use crate::tcp::sender::{Source, TcpSender};
        use crate::tcp::test_io::Harness;
        use crate::tcp::TcpConfig;
        use sojourn_core::packet::{tcp_flags, FlowKey};
        use sojourn_core::{Ecn, Packet, Time};

        fn cfg(ecn: bool, accecn: bool) -> TcpConfig {
            TcpConfig {
                ecn,
                accecn,
                ..TcpConfig::default()
            }
        }

        /// Runs the handshake between a sender and a receiver configured apart; returns
        /// the sender, the SYN-ACK's ACE and the first data packet's ECN field.
        fn handshake(snd: TcpConfig, rcv: TcpConfig) -> (TcpSender, u8, Ecn) {
            let mut h = Harness::new();
            let mut s = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &snd, Source::Bulk, 1);
            let mut r = TcpReceiver::new(0, FlowKey::default(), 0, &rcv, 0);
            s.start(&mut h.io(Time::ZERO));
            let syn = h.take().pop().unwrap();
            r.on_packet(&syn, &mut h.io(Time(1000)));
            let synack = h.take().pop().unwrap();
            s.on_packet(&synack, &mut h.io(Time(2000)));
            let data = h.take()[0];
            (s, synack.hdr.ace(), data.ecn)
        }

        #[test]
        fn negotiation_and_fallback() {
            // Both ends AccECN: the SYN-ACK reflects the SYN's Not-ECT field (0b010).
            let (s, ace, ecn) = handshake(cfg(true, true), cfg(true, true));
            assert_eq!(ace, 0b010);
            assert!(s.accecn.is_some());
            assert_eq!(ecn, Ecn::Ect0);
            // A peer with only RFC 3168 ECN answers ECE alone: classic ECN, data ECT(0).
            let (s, ace, ecn) = handshake(cfg(true, true), cfg(true, false));
            assert_eq!(ace, 0b001);
            assert!(s.accecn.is_none());
            assert_eq!(ecn, Ecn::Ect0);
            // A peer without ECN: neither, data Not-ECT.
            let (s, ace, ecn) = handshake(cfg(true, true), cfg(false, false));
            assert_eq!(ace, 0);
            assert!(s.accecn.is_none());
            assert_eq!(ecn, Ecn::NotEct);
            // A classic sender meeting an AccECN receiver: no AE on its SYN, classic ECN.
            let (s, ace, _) = handshake(cfg(true, false), cfg(true, true));
            assert_eq!(ace, 0b001);
            assert!(s.accecn.is_none());
        }

        fn ack(ack: u64, ace: u8) -> Packet {
            let mut p = Packet::default();
            p.hdr.ack = ack;
            p.hdr.window = 1 << 30;
            p.hdr.flags = tcp_flags::ACK;
            p.hdr.set_ace(ace);
            p
        }

        #[test]
        fn dctcp_alpha_from_accecn_is_the_hand_computed_recursion() {
            let c = TcpConfig {
                cc: CcKind::Dctcp,
                accecn: true,
                ecn: true,
                handshake: false,
                ..TcpConfig::default()
            };
            let mut h = Harness::new();
            let mut s = TcpSender::new(0, FlowKey::default(), 0, 1, 0, &c, Source::Bulk, 1);
            s.start(&mut h.io(Time::ZERO));
            assert_eq!(s.snd_nxt, 1 + 10 * 1448, "the initial window");
            let alpha = |s: &TcpSender| match &s.cc {
                AnyCc::Dctcp(d) => d.alpha(),
                _ => unreachable!(),
            };
            let mss = 1448;
            // ACK 1: 2 packets, 1 CE (ACE 5 → 6). The first window ends here: α = 1024 −
            // (1024 >> 4) + (1 << 6) / 2 = 1024 − 64 + 32 = 992 (RFC 8257 §3.3 in Linux's
            // integers).
            s.on_packet(&ack(1 + 2 * mss, 6), &mut h.io(Time(1_000_000)));
            assert_eq!(s.cs.delivered_ce, 1);
            assert_eq!(alpha(&s), 992.0 / 1024.0);
            // The next window ends when the first 10 packets are acknowledged: 8 more, of
            // which 4 CE, reported as ACE 6 → 0 (wrap) → 2 → 2 → 2.
            for (i, ace) in [0u8, 2, 2, 2].into_iter().enumerate() {
                let a = 1 + (4 + 2 * i as u64) * mss;
                s.on_packet(&ack(a, ace), &mut h.io(Time(2_000_000 + i as u64)));
            }
            assert_eq!(s.cs.delivered_ce, 5, "exact CE count through the ACE wrap");
            // α = 992 − (992 >> 4) + (4 << 6) / 8 = 992 − 62 + 32 = 962.
            assert_eq!(alpha(&s), 962.0 / 1024.0);
            // No CWR flag in AccECN mode (CWR is a bit of ACE).
            assert!(h.out.iter().all(|p| p.hdr.flags & tcp_flags::CWR == 0));
        }
    }
}
