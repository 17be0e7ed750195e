//! Human units in experiment files: `"10Mbit"`, `"100ms"`, `"1.5KiB"`.
//!
//! Rates follow tc's names, case-insensitive: bits per second with SI prefixes (`kbit`,
//! `Mbit`, `Gbit`) or IEC ones (`Kibit`), and bytes per second for `bps`, `kbps`, `Mbps`,
//! `Gbps` (tc(8): "mbps Megabytes per second"), so `10Mbps` = 80 Mbit/s. Sizes are bytes with SI (`kB` = 1000) or IEC
//! (`KiB` = 1024) prefixes. Durations take `ns`, `us`, `ms`, `s`, `min`, `h`.

use crate::time::Duration;
use core::fmt;

fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let num: String = s[..end].chars().filter(|&c| c != '_').collect();
    let v: f64 = num.parse().ok()?;
    Some((v, s[end..].trim()))
}

/// Parses a duration such as `"100ms"`, `"1.5s"`, `"250us"`, `"2min"`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) =
        split_number(s).ok_or_else(|| format!("expected a duration like \"100ms\", got {s:?}"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "min" | "m" => 60e9,
        "h" => 3600e9,
        "" => {
            return Err(format!(
                "duration {s:?} needs a unit (ns, us, ms, s, min, h)"
            ))
        }
        _ => {
            return Err(format!(
                "unknown duration unit {unit:?} in {s:?} (use ns, us, ms, s, min, h)"
            ))
        }
    };
    let ns = v * scale;
    if !ns.is_finite() || ns > u64::MAX as f64 {
        return Err(format!("duration {s:?} is out of range"));
    }
    Ok(Duration(ns.round() as u64))
}

/// tc's rate units (iproute2 `get_rate`, matched case-insensitively): bits per second with
/// SI (`kbit` = 1000) or IEC (`kibit` = 1024) prefixes, and **bytes** per second for every
/// `…bps` name (`bps`, `kbps`/`KBps`, `mbps`/`MBps`, `gbps`, `tbps`; `kibps`, `mibps`, …),
/// so `"10mbps"` is 80 Mbit/s exactly as `tc … rate 10mbps` is. The factors are bits.
const TC_RATE_UNITS: &[(&str, f64)] = &[
    ("bit", 1.0),
    ("kibit", 1024.0),
    ("kbit", 1e3),
    ("mibit", 1024.0 * 1024.0),
    ("mbit", 1e6),
    ("gibit", 1024.0 * 1024.0 * 1024.0),
    ("gbit", 1e9),
    ("tibit", 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("tbit", 1e12),
    ("bps", 8.0),
    ("kibps", 8.0 * 1024.0),
    ("kbps", 8e3),
    ("mibps", 8.0 * 1024.0 * 1024.0),
    ("mbps", 8e6),
    ("gibps", 8.0 * 1024.0 * 1024.0 * 1024.0),
    ("gbps", 8e9),
    ("tibps", 8.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("tbps", 8e12),
];

/// The factor (bit/s per unit) of a rate unit: tc's names, plus sojourn's explicit
/// `bit/s`, `kbit/s`, `Mbit/s`, `Gbit/s`, `Tbit/s` (bits, any case).
pub fn rate_unit_factor(unit: &str) -> Option<f64> {
    let u = unit.to_ascii_lowercase();
    let u = u.strip_suffix("/s").unwrap_or(&u);
    if unit.ends_with("/s") && !u.ends_with("bit") {
        return None; // "MB/s" and friends: ambiguous spellings are refused
    }
    TC_RATE_UNITS
        .iter()
        .find(|(name, _)| *name == u)
        .map(|&(_, f)| f)
}

/// Parses a rate such as `"10Mbit"`, `"1Gbit"`, `"87kbit"`, `"1.5Mbit/s"`; returns bit/s.
/// Units follow tc (see [`TC_RATE_UNITS`]): `"10Mbps"` is 10 mega**bytes** per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) =
        split_number(s).ok_or_else(|| format!("expected a rate like \"10Mbit\", got {s:?}"))?;
    if unit.is_empty() {
        return Err(format!("rate {s:?} needs a unit (bit, kbit, Mbit, Gbit)"));
    }
    let scale = rate_unit_factor(unit).ok_or_else(|| {
        format!("unknown rate unit {unit:?} in {s:?} (use bit, kbit, Mbit, Gbit; tc's bps, kbps, mbps, gbps are bytes per second)")
    })?;
    let bps = v * scale;
    if !bps.is_finite() || bps > u64::MAX as f64 {
        return Err(format!("rate {s:?} is out of range"));
    }
    Ok(bps.round() as u64)
}

/// Parses a size such as `"1500B"`, `"1.5KiB"`, `"300KiB"`, `"1GiB"`, `"64kB"`; returns bytes.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)
        .ok_or_else(|| format!("expected a size like \"1500B\" or \"300KiB\", got {s:?}"))?;
    let scale = match unit {
        "B" | "b" | "" => 1.0,
        "kB" | "KB" | "k" => 1e3,
        "MB" | "M" => 1e6,
        "GB" | "G" => 1e9,
        "TB" => 1e12,
        "KiB" | "Ki" | "Kb" => 1024.0,
        "MiB" | "Mi" | "Mb" => 1024.0 * 1024.0,
        "GiB" | "Gi" | "Gb" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0f64.powi(4),
        _ => {
            return Err(format!(
                "unknown size unit {unit:?} in {s:?} (use B, kB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    let b = v * scale;
    if !b.is_finite() || b > u64::MAX as f64 {
        return Err(format!("size {s:?} is out of range"));
    }
    Ok(b.round() as u64)
}

pub(crate) fn fmt_duration(d: Duration, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let ns = d.0;
    if ns == 0 {
        write!(f, "0s")
    } else if ns.is_multiple_of(1_000_000_000) {
        write!(f, "{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        write!(f, "{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        write!(f, "{}us", ns / 1_000)
    } else {
        write!(f, "{}ns", ns)
    }
}

/// Formats a rate in the largest unit that keeps it readable, e.g. `10Mbit`.
pub fn fmt_rate(bps: u64) -> String {
    let v = bps as f64;
    if v >= 1e9 {
        format!("{}Gbit", v / 1e9)
    } else if v >= 1e6 {
        format!("{}Mbit", v / 1e6)
    } else if v >= 1e3 {
        format!("{}kbit", v / 1e3)
    } else {
        format!("{}bit", bps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms").unwrap(), Duration::from_ms(100));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_ms(1500));
        assert_eq!(parse_duration("0.5ms").unwrap(), Duration::from_us(500));
        assert_eq!(parse_duration("47.5ms").unwrap(), Duration::from_us(47_500));
        assert_eq!(parse_duration("6h").unwrap(), Duration::from_secs(6 * 3600));
        assert!(parse_duration("100").unwrap_err().contains("needs a unit"));
        assert!(parse_duration("5 parsecs")
            .unwrap_err()
            .contains("unknown duration unit"));
        assert!(parse_duration("-5ms").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10Mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate("1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("87kbit").unwrap(), 87_000);
        assert_eq!(parse_rate("1.7Mbit").unwrap(), 1_700_000);
        assert!(parse_rate("10MB").is_err());
        assert!(parse_rate("10MB/s").is_err());
        assert_eq!(parse_rate("10Mbit/s").unwrap(), 10_000_000);
    }

    /// tc(8) "RATES": bps = bytes per second, kbps = kilobytes, mbps = megabytes, gbps =
    /// gigabytes per second; kibit = 1024 bit/s; names match case-insensitively (strcasecmp).
    #[test]
    fn rates_follow_tc_byte_units() {
        assert_eq!(parse_rate("10Mbps").unwrap(), 80_000_000);
        assert_eq!(parse_rate("10mbps").unwrap(), 80_000_000);
        assert_eq!(parse_rate("10MBps").unwrap(), 80_000_000);
        assert_eq!(parse_rate("100kbps").unwrap(), 800_000);
        assert_eq!(parse_rate("1gbps").unwrap(), 8_000_000_000);
        assert_eq!(parse_rate("1500bps").unwrap(), 12_000);
        assert_eq!(parse_rate("1kibit").unwrap(), 1024);
        assert_eq!(parse_rate("1MiBps").unwrap(), 8_388_608);
        assert_eq!(parse_rate("10MBIT").unwrap(), 10_000_000);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1500B").unwrap(), 1500);
        assert_eq!(parse_bytes("1.5KiB").unwrap(), 1536);
        assert_eq!(parse_bytes("300KiB").unwrap(), 307_200);
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("64kB").unwrap(), 64_000);
        assert!(parse_bytes("ten").is_err());
    }

    #[test]
    fn display_round_trips() {
        for s in ["100ms", "5s", "250us", "17ns"] {
            let d = parse_duration(s).unwrap();
            assert_eq!(d.to_string(), s);
        }
    }
}
