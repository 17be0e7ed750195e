//! Connection tracking and classification at nodes, the way the seed-000 Linux deployment
//! does age-based scheduling: nftables counts a connection's bytes (`ct bytes`) and a rule
//! maps that count to `skb->priority` through inclusive ranges
//! (`meta priority set ct bytes map { 0-T : 1:1, * : 1:2 }`), which prio / pfifo_fast /
//! CAKE then honour.
//!
//! Conntrack semantics (Linux `nft_ct` with accounting): the count covers both directions
//! unless `direction = "original"`, counts IP-layer lengths (the frame minus its 14-byte
//! Ethernet header; or payload bytes with `bytes = "payload"`), and already includes the
//! current packet when the rule runs (conntrack hooks at priority −200, before filter
//! chains at 0). A node counts every packet it originates, forwards or receives.

use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};
use sojourn_core::Packet;

/// Which packets a classifier rule sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hook {
    /// Locally generated packets (nftables `output`): the seed's choice.
    Output,
    /// Routed packets (`forward`).
    Forward,
    /// Both.
    Both,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountDirection {
    Both,
    Original,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountBytes {
    /// IP packet lengths (nftables `ct bytes`).
    Ip,
    /// Transport payload only.
    Payload,
}

/// A classifier rule: `ct bytes` ranges → `skb->priority`.
#[derive(Clone, Debug)]
pub struct ClassifierPlan {
    pub nodes: Vec<u32>,
    pub hook: Hook,
    /// `(upto_bytes inclusive, priority)`, increasing; the last entry may be `u64::MAX` (`*`).
    pub map: Vec<(u64, u32)>,
}

/// Per-node conntrack configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConntrackPlan {
    pub direction: CountDirection,
    pub bytes: CountBytes,
}

impl Default for ConntrackPlan {
    fn default() -> Self {
        ConntrackPlan {
            direction: CountDirection::Both,
            bytes: CountBytes::Ip,
        }
    }
}

/// Per-node state: a byte count per flow (flow ids are dense).
#[derive(Clone, Debug, Default)]
pub struct Conntrack {
    pub plan: ConntrackPlan,
    counts: Vec<u64>,
}

impl Conntrack {
    pub fn new(plan: ConntrackPlan) -> Conntrack {
        Conntrack {
            plan,
            counts: Vec::new(),
        }
    }

    /// Accounts `pkt` and returns the connection's count including it. `original` says
    /// whether the packet travels in the connection's original direction.
    #[inline]
    pub fn account(&mut self, pkt: &Packet, original: bool) -> u64 {
        let f = pkt.flow as usize;
        if self.counts.len() <= f {
            self.counts.resize(f + 1, 0);
        }
        if original || self.plan.direction == CountDirection::Both {
            self.counts[f] += match self.plan.bytes {
                // skb->len at the netfilter hook: a GSO buffer is one IP packet there,
                // its headers counted once (payload + one set of headers).
                CountBytes::Ip => ip_len(pkt) as u64,
                CountBytes::Payload => pkt.hdr.payload_bytes as u64,
            };
        }
        self.counts[f]
    }
}

/// The IP length netfilter sees (`skb->len` without the 14-byte Ethernet header): for a
/// GSO buffer the payload plus one set of headers.
#[inline]
pub fn ip_len(pkt: &Packet) -> u32 {
    let n = pkt.wire_packets();
    let headers = pkt.len_bytes.saturating_sub(pkt.hdr.payload_bytes) / n;
    (pkt.hdr.payload_bytes + headers).saturating_sub(14)
}

/// Maps a count through the inclusive ranges.
#[inline]
pub fn lookup(map: &[(u64, u32)], count: u64) -> Option<u32> {
    map.iter()
        .find(|&&(upto, _)| count <= upto)
        .map(|&(_, p)| p)
}

/// Parses `"1:2"` (major:minor, hexadecimal like tc) or an integer.
pub fn parse_priority(v: &Value, path: &str) -> ConfResult<u32> {
    match v {
        Value::Int(i) if *i >= 0 && *i <= u32::MAX as i64 => Ok(*i as u32),
        Value::Str(s) => {
            let (a, b) = s.split_once(':').ok_or_else(|| {
                ConfError::new(path, format!("expected a classid like \"1:2\", got {s:?}"))
            })?;
            let major = u32::from_str_radix(a.trim(), 16)
                .map_err(|_| ConfError::new(path, format!("bad major in {s:?}")))?;
            let minor = if b.trim().is_empty() {
                0
            } else {
                u32::from_str_radix(b.trim(), 16)
                    .map_err(|_| ConfError::new(path, format!("bad minor in {s:?}")))?
            };
            if major > 0xFFFF || minor > 0xFFFF {
                return Err(ConfError::new(
                    path,
                    format!("{s:?}: major and minor are 16-bit"),
                ));
            }
            Ok(major << 16 | minor)
        }
        other => Err(ConfError::new(
            path,
            format!(
                "expected a classid string like \"1:2\" or an integer, got {}",
                other.type_name()
            ),
        )),
    }
}

/// Parses one `[[classifier]]` table.
pub fn parse_classifier(
    t: &Table,
    path: &str,
    node_names: &[String],
    hosts: &[u32],
) -> ConfResult<(ClassifierPlan, ConntrackPlan)> {
    let mut p = Params::new(path, t);
    let nodes: Vec<u32> = match p.raw("at") {
        Some(Value::Str(s)) if s == "hosts" => hosts.to_vec(),
        Some(Value::Str(s)) if s == "all" => (0..node_names.len() as u32).collect(),
        Some(Value::Str(s)) => vec![node_names
            .iter()
            .position(|n| n == s)
            .ok_or_else(|| p.err("at", format!("no node named {s:?}")))?
            as u32],
        Some(Value::Array(a)) => {
            let mut v = Vec::new();
            for (i, x) in a.iter().enumerate() {
                let Value::Str(s) = x else {
                    return Err(ConfError::new(
                        format!("{path}.at[{i}]"),
                        "expected a node name",
                    ));
                };
                v.push(node_names.iter().position(|n| n == s).ok_or_else(|| {
                    ConfError::new(format!("{path}.at[{i}]"), format!("no node named {s:?}"))
                })? as u32);
            }
            v
        }
        None => {
            return Err(p.err(
                "at",
                "required: a node name, a list, \"hosts\" (every traffic endpoint) or \"all\"",
            ))
        }
        Some(v) => {
            return Err(p.err(
                "at",
                format!("expected a node name or list, got {}", v.type_name()),
            ))
        }
    };
    let hook = match p.choice("hook", &["output", "forward", "both"], "output")? {
        "output" => Hook::Output,
        "forward" => Hook::Forward,
        _ => Hook::Both,
    };
    let direction = match p.choice("direction", &["both", "original"], "both")? {
        "both" => CountDirection::Both,
        _ => CountDirection::Original,
    };
    let bytes = match p.choice("bytes", &["ip", "payload"], "ip")? {
        "ip" => CountBytes::Ip,
        _ => CountBytes::Payload,
    };
    let Some(Value::Array(entries)) = p.raw("map") else {
        return Err(p.err(
            "map",
            "required: [{ upto = \"6331208B\", priority = \"1:1\" }, { priority = \"1:2\" }]",
        ));
    };
    let mut map = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let ep = format!("{path}.map[{i}]");
        let Value::Table(et) = e else {
            return Err(ConfError::new(
                ep,
                "expected { upto = SIZE, priority = \"M:m\" }",
            ));
        };
        let mut mp = Params::new(ep.clone(), et);
        let upto = mp.bytes_opt("upto")?.unwrap_or(u64::MAX);
        let prio = match mp.raw("priority") {
            Some(v) => parse_priority(v, &format!("{ep}.priority"))?,
            None => return Err(mp.err("priority", "required")),
        };
        mp.finish()?;
        if let Some(&(last, _)) = map.last() {
            if upto <= last {
                return Err(ConfError::new(format!("{ep}.upto"), "ranges must increase"));
            }
        }
        map.push((upto, prio));
    }
    if map.is_empty() {
        return Err(p.err("map", "needs at least one entry"));
    }
    p.finish()?;
    Ok((
        ClassifierPlan { nodes, hook, map },
        ConntrackPlan { direction, bytes },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_inclusive_like_nft() {
        let map = vec![(1000, 0x10001), (u64::MAX, 0x10002)];
        assert_eq!(lookup(&map, 0), Some(0x10001));
        assert_eq!(lookup(&map, 1000), Some(0x10001), "0-T includes T");
        assert_eq!(lookup(&map, 1001), Some(0x10002));
    }

    #[test]
    fn classids_parse_like_tc() {
        assert_eq!(
            parse_priority(&Value::Str("1:2".into()), "p").unwrap(),
            0x10002
        );
        assert_eq!(
            parse_priority(&Value::Str("1:a".into()), "p").unwrap(),
            0x1000a,
            "tc classids are hex"
        );
        assert_eq!(parse_priority(&Value::Int(6), "p").unwrap(), 6);
        assert!(parse_priority(&Value::Str("12".into()), "p").is_err());
    }

    #[test]
    fn conntrack_counts_ip_bytes_both_directions_including_current() {
        let mut ct = Conntrack::new(ConntrackPlan::default());
        let mut data = Packet::synthetic(0, 3, 1514);
        data.hdr.payload_bytes = 1448;
        let ack = Packet::synthetic(1, 3, 66);
        assert_eq!(
            ct.account(&data, true),
            1500,
            "IP length of the current packet is included"
        );
        assert_eq!(ct.account(&ack, false), 1552, "reply direction counts too");
        let mut orig = Conntrack::new(ConntrackPlan {
            direction: CountDirection::Original,
            bytes: CountBytes::Payload,
        });
        assert_eq!(orig.account(&data, true), 1448);
        assert_eq!(orig.account(&ack, false), 1448);
        // A 45-segment GSO buffer is one IP packet at the output hook: payload + one
        // 52-B IP/TCP header set (skb->len), not 45 of them.
        let mut gso = Packet::synthetic(2, 3, 45 * 1514);
        gso.hdr.payload_bytes = 45 * 1448;
        gso.gso_segs = 45;
        gso.gso_size = 1448;
        assert_eq!(ct.account(&gso, true), 1552 + 45 * 1448 + 52);
    }
}
