//! Human units in experiment files: `"10Mbit"`, `"100ms"`, `"1.5KiB"`.
//!
//! Rates are bits per second with SI prefixes (`kbit`, `Mbit`, `Gbit`; `bps` and `bit`
//! accepted; tc's `mbit` lowercase too). Sizes are bytes with SI (`kB` = 1000) or IEC
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

/// Parses a rate such as `"10Mbit"`, `"1Gbit"`, `"87kbit"`, `"1.5Mbps"`; returns bit/s.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) =
        split_number(s).ok_or_else(|| format!("expected a rate like \"10Mbit\", got {s:?}"))?;
    let scale = match unit {
        "bit" | "bps" | "bit/s" => 1.0,
        "kbit" | "Kbit" | "kbps" | "kbit/s" => 1e3,
        "Mbit" | "mbit" | "Mbps" | "mbps" | "Mbit/s" => 1e6,
        "Gbit" | "gbit" | "Gbps" | "gbps" | "Gbit/s" => 1e9,
        "Tbit" | "tbit" | "Tbps" => 1e12,
        "" => return Err(format!("rate {s:?} needs a unit (bit, kbit, Mbit, Gbit)")),
        _ => {
            return Err(format!(
                "unknown rate unit {unit:?} in {s:?} (use bit, kbit, Mbit, Gbit)"
            ))
        }
    };
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
