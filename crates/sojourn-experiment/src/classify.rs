//! Classifier rules and conntrack options of an experiment (`[[classifier]]`), the way the
//! seed-000 Linux deployment does age-based scheduling: nftables counts a connection's
//! bytes (`ct bytes`) and a rule maps that count to `skb->priority` through inclusive
//! ranges (`meta priority set ct bytes map { 0-T : 1:1, * : 1:2 }`), which prio /
//! pfifo_fast / CAKE then honour. This module only parses and validates; the counting
//! itself is sojourn-core's `conntrack` (docs/repro/age-based.md).

use sojourn_core::params::{ConfError, ConfResult, Params, Table, Value};

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

pub use sojourn_core::conntrack::{ConntrackPlan, CountBytes, CountDirection};

/// A classifier rule: `ct bytes` ranges → `skb->priority`.
#[derive(Clone, Debug)]
pub struct ClassifierPlan {
    pub nodes: Vec<u32>,
    pub hook: Hook,
    /// `(upto_bytes inclusive, priority)`, increasing; the last entry may be `u64::MAX` (`*`).
    pub map: Vec<(u64, u32)>,
    /// An adaptive threshold (`adapt = { policy = "median", interval = "1s" }`): `None`
    /// keeps the map as written.
    pub adapt: Option<Adapt>,
}

/// Seed 000's adaptive policy (its prototype's): at the end of every `interval` the
/// two-level map's threshold becomes the median size, as this node's conntrack counts it, of
/// the connections that finished during that interval (kept when none did; for an even
/// count the mean of the two middle sizes, rounded down). `sojourn deploy threshold --watch
/// --policy median` is the same policy on a live map (docs/deploy.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adapt {
    pub interval: sojourn_core::Duration,
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
    let adapt = match p.raw("adapt") {
        None => None,
        Some(Value::Table(at)) => {
            let ap_path = format!("{path}.adapt");
            let mut ap = Params::new(ap_path.clone(), at);
            ap.choice("policy", &["median"], "median")?;
            let interval = ap.duration("interval", sojourn_core::Duration::from_secs(1))?;
            ap.finish()?;
            if interval.is_zero() {
                return Err(ConfError::new(
                    format!("{ap_path}.interval"),
                    "must be positive",
                ));
            }
            if map.len() != 2 || map[1].0 != u64::MAX {
                return Err(ConfError::new(
                    ap_path,
                    "the median policy adapts a two-level map: [{ upto = T, priority = \"…\" }, \
                     { priority = \"…\" }]",
                ));
            }
            Some(Adapt { interval })
        }
        Some(v) => {
            return Err(p.err(
                "adapt",
                format!(
                    "expected {{ policy = \"median\", interval = \"1s\" }}, got {}",
                    v.type_name()
                ),
            ))
        }
    };
    p.finish()?;
    Ok((
        ClassifierPlan {
            nodes,
            hook,
            map,
            adapt,
        },
        ConntrackPlan { direction, bytes },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
