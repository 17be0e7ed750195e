//! The 802.11 PHY in the 5 GHz band as far as airtime goes: data rates of the HT (802.11n),
//! VHT (802.11ac) and HE (802.11ax) modulation and coding schemes, PPDU durations, and the
//! fixed costs of one transmission opportunity (AIFS, backoff, SIFS, block ack).
//!
//! Sources: IEEE Std 802.11-2020 (OFDM PHY, clause 17: slot 9 µs, SIFS 16 µs, legacy
//! preamble 16 µs + L-SIG 4 µs, 4-µs symbols; HT, clause 19: HT-SIG 8 µs, HT-STF 4 µs,
//! 4 µs per HT-LTF, TXTIME with a short guard interval rounded up to a 4-µs boundary; VHT,
//! clause 21: VHT-SIG-A 8 µs, VHT-STF 4 µs, 4 µs per VHT-LTF, VHT-SIG-B 4 µs) and
//! 802.11ax-2021 (HE, clause 27: 12.8-µs symbols plus a 0.8/1.6/3.2-µs guard interval).
//! EDCA for the best-effort access category (AC_BE): AIFSN 3, CWmin 15, CWmax 1023.
//!
//! Data rate = data subcarriers × coded bits per subcarrier × coding rate × spatial
//! streams / symbol time; e.g. HT 20 MHz MCS 0, one stream, long GI: 52 × 1 × 1/2 / 4 µs =
//! 6.5 Mbit/s; MCS 15 (MCS 7, two streams), short GI: 52 × 6 × 5/6 × 2 / 3.6 µs = 144.4.

use crate::time::Duration;

/// Slot time of the 5 GHz OFDM PHY (aSlotTime).
pub const SLOT_NS: u64 = 9_000;
/// Short interframe space (aSIFSTime).
pub const SIFS_NS: u64 = 16_000;
/// AIFSN of AC_BE: AIFS = SIFS + 3 slots = 43 µs.
pub const AIFSN_BE: u64 = 3;
/// Contention window bounds of AC_BE (in slots; backoff is drawn uniformly in [0, CW]).
pub const CW_MIN_BE: u32 = 15;
pub const CW_MAX_BE: u32 = 1023;
/// Legacy (non-HT) preamble and signal field: L-STF 8 + L-LTF 8 + L-SIG 4 µs.
pub const LEGACY_PREAMBLE_NS: u64 = 20_000;
/// SERVICE field (16 bits) and tail (6 bits) added to the PSDU before coding.
const SERVICE_TAIL_BITS: u64 = 16 + 6;
/// A compressed BlockAck frame: 32 bytes (frame control 2, duration 2, RA 6, TA 6,
/// BA control 2, starting sequence control 2, 8-byte bitmap, FCS 4).
pub const BLOCK_ACK_BYTES: u64 = 32;
/// The control response rate for the block ack: 24 Mbit/s, the highest mandatory OFDM
/// rate (an assumption: a device answers at the highest basic rate not above the data
/// rate; 24 Mbit/s is what most 5 GHz networks use).
pub const BLOCK_ACK_RATE_BPS: u64 = 24_000_000;
/// Per-MPDU framing around an IP packet: QoS data MAC header 26 + LLC/SNAP 8 + FCS 4 bytes.
pub const MPDU_OVERHEAD_BYTES: u32 = 26 + 8 + 4;
/// The A-MPDU subframe delimiter (4 bytes); subframes are padded to 4-byte multiples
/// (all but the last).
pub const AMPDU_DELIMITER_BYTES: u32 = 4;
/// Ethernet header the simulator's packet lengths include (replaced by the 802.11 header).
pub const ETHERNET_HEADER_BYTES: u32 = 14;

/// Which PHY an MCS belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standard {
    /// 802.11n, HT-mixed format.
    Ht,
    /// 802.11ac.
    Vht,
    /// 802.11ax, HE single-user PPDU.
    He,
}

/// A rate a station transmits and receives at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhyRate {
    pub standard: Standard,
    /// Channel width in MHz: 20, 40, 80 (or 160 for VHT/HE).
    pub width_mhz: u32,
    /// MCS index within one stream (HT MCS 15 is written mcs 7, streams 2).
    pub mcs: u8,
    pub streams: u8,
    /// Guard interval in ns: 800 (long) or 400 (short) for HT/VHT; 800, 1600, 3200 for HE.
    pub gi_ns: u32,
}

/// (coded bits per subcarrier, coding rate numerator, denominator) of MCS 0–11.
const MODULATION: [(u64, u64, u64); 12] = [
    (1, 1, 2),  // BPSK 1/2
    (2, 1, 2),  // QPSK 1/2
    (2, 3, 4),  // QPSK 3/4
    (4, 1, 2),  // 16-QAM 1/2
    (4, 3, 4),  // 16-QAM 3/4
    (6, 2, 3),  // 64-QAM 2/3
    (6, 3, 4),  // 64-QAM 3/4
    (6, 5, 6),  // 64-QAM 5/6
    (8, 3, 4),  // 256-QAM 3/4 (VHT, HE)
    (8, 5, 6),  // 256-QAM 5/6 (VHT, HE)
    (10, 3, 4), // 1024-QAM 3/4 (HE)
    (10, 5, 6), // 1024-QAM 5/6 (HE)
];

impl PhyRate {
    /// Checks the combination against the standard; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let (max_mcs, widths, gis, max_ss): (u8, &[u32], &[u32], u8) = match self.standard {
            Standard::Ht => (7, &[20, 40], &[800, 400], 4),
            Standard::Vht => (9, &[20, 40, 80, 160], &[800, 400], 8),
            Standard::He => (11, &[20, 40, 80, 160], &[800, 1600, 3200], 8),
        };
        if self.mcs > max_mcs {
            return Err(format!(
                "mcs {} is above this PHY's highest, {max_mcs}",
                self.mcs
            ));
        }
        if !widths.contains(&self.width_mhz) {
            return Err(format!(
                "width {} MHz is not one of {widths:?}",
                self.width_mhz
            ));
        }
        if !gis.contains(&self.gi_ns) {
            return Err(format!(
                "guard interval {} ns is not one of {gis:?}",
                self.gi_ns
            ));
        }
        if self.streams == 0 || self.streams > max_ss {
            return Err(format!("streams {} must be 1 to {max_ss}", self.streams));
        }
        if self.data_subcarriers() == 0 {
            return Err("no data subcarriers for this width".into());
        }
        // HT/VHT allow only combinations whose bits per symbol are whole (e.g. VHT
        // 20 MHz MCS 9 with one or two streams does not exist).
        let (bpscs, num, den) = MODULATION[self.mcs as usize];
        if self.standard != Standard::He
            && !(self.data_subcarriers() * bpscs * num * self.streams as u64).is_multiple_of(den)
        {
            return Err(format!(
                "mcs {} with {} stream(s) at {} MHz is not a valid combination of the standard",
                self.mcs, self.streams, self.width_mhz
            ));
        }
        Ok(())
    }

    /// Data subcarriers (N_SD) per symbol.
    pub fn data_subcarriers(&self) -> u64 {
        match (self.standard, self.width_mhz) {
            (Standard::Ht | Standard::Vht, 20) => 52,
            (Standard::Ht | Standard::Vht, 40) => 108,
            (Standard::Vht, 80) => 234,
            (Standard::Vht, 160) => 468,
            (Standard::He, 20) => 234,
            (Standard::He, 40) => 468,
            (Standard::He, 80) => 980,
            (Standard::He, 160) => 1960,
            _ => 0,
        }
    }

    /// Data bits per OFDM symbol (N_DBPS).
    pub fn bits_per_symbol(&self) -> u64 {
        let (bpscs, num, den) = MODULATION[self.mcs as usize];
        self.data_subcarriers() * bpscs * num * self.streams as u64 / den
    }

    /// Symbol duration including the guard interval, in ns.
    pub fn symbol_ns(&self) -> u64 {
        match self.standard {
            Standard::Ht | Standard::Vht => 3_200 + self.gi_ns as u64,
            Standard::He => 12_800 + self.gi_ns as u64,
        }
    }

    /// The data rate in bit/s (rounded down; exact N_DBPS, which HE allows to be
    /// fractional: HE 80 MHz MCS 11 × 2 has 16,333⅓ bits per symbol).
    pub fn rate_bps(&self) -> u64 {
        let (bpscs, num, den) = MODULATION[self.mcs as usize];
        let bits = self.data_subcarriers() * bpscs * num * self.streams as u64;
        bits * 1_000_000_000 / (den * self.symbol_ns())
    }

    /// Preamble and signal fields before the data symbols, in ns.
    pub fn preamble_ns(&self) -> u64 {
        let n_ltf = match self.streams {
            1 => 1,
            2 => 2,
            3 | 4 => 4,
            5 | 6 => 6,
            _ => 8,
        } as u64;
        match self.standard {
            // HT-SIG 8 + HT-STF 4 + 4 µs per HT-LTF.
            Standard::Ht => LEGACY_PREAMBLE_NS + 12_000 + 4_000 * n_ltf,
            // VHT-SIG-A 8 + VHT-STF 4 + 4 µs per VHT-LTF + VHT-SIG-B 4.
            Standard::Vht => LEGACY_PREAMBLE_NS + 16_000 + 4_000 * n_ltf,
            // RL-SIG 4 + HE-SIG-A 8 + HE-STF 4 + per HE-LTF 6.4 µs (2x LTF) + 0.8 µs GI.
            Standard::He => LEGACY_PREAMBLE_NS + 16_000 + 7_200 * n_ltf,
        }
    }

    /// Duration of a PPDU carrying a PSDU of `psdu_bytes`: preamble plus
    /// ceil((16 + 8 × bytes + 6) / N_DBPS) symbols; HT/VHT with the short guard interval
    /// round the symbols' total up to a multiple of 4 µs (the TXTIME equations of
    /// clauses 19 and 21).
    pub fn ppdu_ns(&self, psdu_bytes: u64) -> u64 {
        let symbols = (SERVICE_TAIL_BITS + 8 * psdu_bytes).div_ceil(self.bits_per_symbol());
        let mut data = symbols * self.symbol_ns();
        if self.standard != Standard::He && self.gi_ns == 400 {
            data = data.div_ceil(4_000) * 4_000;
        }
        self.preamble_ns() + data
    }

    /// The largest A-MPDU the standard allows, in bytes: 65,535 for HT, 1,048,575 for VHT,
    /// 6,500,631 for HE.
    pub fn max_ampdu_bytes(&self) -> u64 {
        match self.standard {
            Standard::Ht => 65_535,
            Standard::Vht => 1_048_575,
            Standard::He => 6_500_631,
        }
    }
}

/// A legacy OFDM (clause 17) frame of `bytes` at `rate_bps` (6–54 Mbit/s): 20 µs of
/// preamble and signal, then 4-µs symbols of rate × 4 µs bits each.
pub fn legacy_frame_ns(bytes: u64, rate_bps: u64) -> u64 {
    let bits_per_symbol = rate_bps * 4 / 1_000_000;
    LEGACY_PREAMBLE_NS + (SERVICE_TAIL_BITS + 8 * bytes).div_ceil(bits_per_symbol) * 4_000
}

/// AIFS of AC_BE: SIFS + AIFSN × slot = 43 µs.
pub fn aifs_ns() -> u64 {
    SIFS_NS + AIFSN_BE * SLOT_NS
}

/// What follows the data PPDU: SIFS and the block ack (16 + 32 = 48 µs at 24 Mbit/s).
pub fn ack_ns() -> u64 {
    SIFS_NS + legacy_frame_ns(BLOCK_ACK_BYTES, BLOCK_ACK_RATE_BPS)
}

/// Bytes an IP packet of the simulator's `len_bytes` (Ethernet framing) occupies as an
/// MPDU: the Ethernet header replaced by the 802.11 QoS header, LLC/SNAP and FCS.
pub fn mpdu_bytes(len_bytes: u32) -> u32 {
    len_bytes.saturating_sub(ETHERNET_HEADER_BYTES) + MPDU_OVERHEAD_BYTES
}

/// An A-MPDU subframe: delimiter + MPDU, padded to a multiple of 4 bytes.
pub fn subframe_bytes(len_bytes: u32) -> u32 {
    (AMPDU_DELIMITER_BYTES + mpdu_bytes(len_bytes)).div_ceil(4) * 4
}

/// The padding the last subframe of an A-MPDU does not need.
pub fn last_subframe_pad(len_bytes: u32) -> u32 {
    subframe_bytes(len_bytes) - (AMPDU_DELIMITER_BYTES + mpdu_bytes(len_bytes))
}

/// A nanosecond count as a [`Duration`].
pub fn ns(d: u64) -> Duration {
    Duration::from_ns(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ht(mcs: u8, streams: u8, gi_ns: u32) -> PhyRate {
        PhyRate {
            standard: Standard::Ht,
            width_mhz: 20,
            mcs,
            streams,
            gi_ns,
        }
    }

    /// The standard's rate tables (802.11-2020 tables 19-27, 21-30; 802.11ax table 27-55).
    #[test]
    fn data_rates_match_the_standard_tables() {
        assert_eq!(ht(0, 1, 800).rate_bps(), 6_500_000);
        assert_eq!(ht(7, 1, 800).rate_bps(), 65_000_000);
        assert_eq!(ht(7, 1, 400).rate_bps(), 72_222_222);
        assert_eq!(ht(7, 2, 400).rate_bps(), 144_444_444);
        let ht40 = PhyRate {
            width_mhz: 40,
            ..ht(7, 1, 800)
        };
        assert_eq!(ht40.rate_bps(), 135_000_000);
        let phy = |standard, width_mhz, mcs, streams, gi_ns| PhyRate {
            standard,
            width_mhz,
            mcs,
            streams,
            gi_ns,
        };
        assert_eq!(phy(Standard::Vht, 80, 9, 2, 400).rate_bps(), 866_666_666);
        assert_eq!(phy(Standard::He, 80, 11, 2, 800).rate_bps(), 1_200_980_392);
        let he20 = phy(Standard::He, 20, 0, 1, 800);
        assert_eq!(he20.rate_bps(), 8_602_941);
    }

    #[test]
    fn timings_worked_by_hand() {
        // AIFS[BE] = 16 + 3 × 9 = 43 µs.
        assert_eq!(aifs_ns(), 43_000);
        // Block ack at 24 Mbit/s: 20 + ceil((16 + 256 + 6) / 96) × 4 = 32 µs; + SIFS = 48.
        assert_eq!(ack_ns(), 48_000);
        // 1500-byte IP packet (1514 with Ethernet): MPDU 1538, subframe 1542 → 1544.
        assert_eq!(mpdu_bytes(1514), 1538);
        assert_eq!(subframe_bytes(1514), 1544);
        // One 1542-byte A-MPDU at 6.5 Mbit/s: 36 + ceil(12358 / 26) × 4 = 36 + 476 × 4.
        assert_eq!(ht(0, 1, 800).ppdu_ns(1542), 1_940_000);
        // At 144.4 Mbit/s: 40 + roundup4(ceil(12358 / 520) × 3.6) = 40 + 88 µs.
        assert_eq!(ht(7, 2, 400).ppdu_ns(1542), 128_000);
    }

    #[test]
    fn invalid_combinations_are_named() {
        assert!(ht(8, 1, 800).validate().unwrap_err().contains("mcs 8"));
        let bad = PhyRate {
            width_mhz: 80,
            ..ht(0, 1, 800)
        };
        assert!(bad.validate().unwrap_err().contains("width 80"));
        assert!(ht(0, 1, 1600)
            .validate()
            .unwrap_err()
            .contains("guard interval"));
        assert!(ht(0, 1, 800).validate().is_ok());
        let vht20_mcs9 = PhyRate {
            standard: Standard::Vht,
            width_mhz: 20,
            mcs: 9,
            streams: 1,
            gi_ns: 800,
        };
        assert!(vht20_mcs9
            .validate()
            .unwrap_err()
            .contains("not a valid combination"));
        assert!(PhyRate {
            streams: 3,
            ..vht20_mcs9
        }
        .validate()
        .is_ok());
    }
}
