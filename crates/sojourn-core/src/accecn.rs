//! Accurate ECN's handshake tables (RFC 9768 §3.1.1, Tables 2 and 3): what a SYN-ACK
//! answers to an AccECN SYN and what the SYN's sender makes of it. Pure functions of the
//! header bits, shared by every engine: the simulator's TCP negotiates with them, the live
//! forwarder reads the real handshakes it carries with them.

use crate::Ecn;

/// The ECN feedback a handshake settled on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    None,
    /// RFC 3168: ECE until CWR.
    Classic,
    AccEcn,
}

/// The SYN-ACK's ACE of an AccECN receiver: the IP-ECN field the SYN arrived with
/// (RFC 9768 Table 3).
pub fn synack_ace(syn_ecn: Ecn) -> u8 {
    match syn_ecn {
        Ecn::NotEct => 0b010,
        Ecn::Ect1 => 0b011,
        Ecn::Ect0 => 0b100,
        Ecn::Ce => 0b110,
    }
}

/// What an AccECN SYN's sender makes of the SYN-ACK's (AE, CWR, ECE) (RFC 9768 Table 2;
/// Linux `tcp_ecn_rcv_synack`).
pub fn feedback_from_synack(ace: u8) -> Feedback {
    match ace & 7 {
        // No ECN at the server, or one that reflects the SYN's three flags (broken).
        0b000 | 0b111 => Feedback::None,
        // ECE alone: an RFC 3168 server.
        0b001 => Feedback::Classic,
        // The four IP-ECN reflections of Table 3, and the reserved 0b101.
        _ => Feedback::AccEcn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_tables() {
        // RFC 9768 Table 3: the SYN's IP-ECN field reflected in the SYN-ACK.
        assert_eq!(synack_ace(Ecn::NotEct), 0b010);
        assert_eq!(synack_ace(Ecn::Ect1), 0b011);
        assert_eq!(synack_ace(Ecn::Ect0), 0b100);
        assert_eq!(synack_ace(Ecn::Ce), 0b110);
        // Table 2, as the SYN's sender reads the SYN-ACK.
        let f: Vec<Feedback> = (0..8).map(feedback_from_synack).collect();
        use Feedback::*;
        assert_eq!(
            f,
            [None, Classic, AccEcn, AccEcn, AccEcn, AccEcn, AccEcn, None]
        );
    }
}
