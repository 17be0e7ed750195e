//! A whole tc configuration read back from its command lines: `qdisc`, `class` and
//! `filter` lines as [`QdiscSpec::dump`], [`QdiscSpec::dump_classes`] and
//! [`QdiscSpec::dump_filters`] write them (and a user types them), for the classful
//! disciplines whose classes are lines of their own (htb, drr). Each class line becomes an
//! entry of its qdisc's `classes`, each filter one of its `filters`, and the discipline's
//! own parser checks them as it checks a file.

use super::spec::from_tc_node;
use super::vocab::{TcKey, TcNode, TcParent};
use super::{BuildCtx, QdiscSpec};
use crate::params::{ConfError, ConfResult, Table, Value};
use std::collections::BTreeMap;

/// tc keywords of an `htb` class line, mapped to the class table's keys.
pub const HTB_CLASS_KEYS: &[TcKey] = &[
    TcKey::Rate("rate", "rate"),
    TcKey::Rate("ceil", "ceil"),
    TcKey::Size("burst", "burst"),
    TcKey::Size("buffer", "burst"),
    TcKey::Size("cburst", "cburst"),
    TcKey::Size("cbuffer", "cburst"),
    TcKey::Size("quantum", "quantum"),
    TcKey::Int("prio", "prio"),
];

/// tc keywords of a `drr` class line.
pub const DRR_CLASS_KEYS: &[TcKey] = &[TcKey::Size("quantum", "quantum")];

fn err(line: &str, msg: impl Into<String>) -> ConfError {
    ConfError::new("tc", format!("{}: {line:?}", msg.into()))
}

/// `1:10` / `1:` → (major, minor), tc's hex.
fn classid(s: &str) -> Option<(u16, u16)> {
    super::htb::parse_classid(s)
}

/// The words after the object (`qdisc`, `class`, `filter`), without `tc`, the verb and
/// `dev DEV`.
fn body(line: &str) -> (String, Vec<&str>) {
    let mut w: Vec<&str> = line.split_whitespace().collect();
    if w.first() == Some(&"tc") {
        w.remove(0);
    }
    let obj = if w.is_empty() {
        String::new()
    } else {
        w.remove(0).to_string()
    };
    if matches!(w.first(), Some(&"add" | &"replace" | &"change")) {
        w.remove(0);
    }
    if w.first() == Some(&"dev") && w.len() >= 2 {
        w.drain(..2);
    }
    (obj, w)
}

struct ClassLine {
    parent_minor: u16,
    minor: u16,
    kind: String,
    args: Vec<String>,
}

impl QdiscSpec {
    /// A spec from tc command lines (`tc qdisc add dev X root handle 1: htb default 30`,
    /// `tc class add dev X parent 1:1 classid 1:10 htb rate 30Mbit …`, `tc qdisc add dev X
    /// parent 1:10 handle 10: fq_codel`, `tc filter add dev X parent 1: protocol ip prio 1
    /// u32 match ip dst 10.0.0.3/32 flowid 1:10`; the `tc`, verb and `dev X` words may be
    /// left out). `from_tc_lines(dump lines) == spec`.
    pub fn from_tc_lines(lines: &[&str], ctx: &BuildCtx) -> ConfResult<QdiscSpec> {
        let mut nodes: Vec<TcNode> = Vec::new();
        let mut classes: BTreeMap<u16, Vec<ClassLine>> = BTreeMap::new();
        let mut filters: BTreeMap<u16, Vec<Value>> = BTreeMap::new();
        for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            let (obj, w) = body(line);
            match obj.as_str() {
                "qdisc" => nodes.push(qdisc_line(line, &w)?),
                "class" => {
                    let (major, c) = class_line(line, &w)?;
                    classes.entry(major).or_default().push(c);
                }
                "filter" => {
                    let (major, f) = filter_line(line, &w)?;
                    filters.entry(major).or_default().push(f);
                }
                _ => return Err(err(line, "expected a `qdisc`, `class` or `filter` line")),
            }
        }
        let root = nodes
            .iter()
            .position(|n| n.parent == TcParent::Root)
            .ok_or_else(|| ConfError::new("tc", "no root qdisc in the lines"))?;
        let extra = |handle: u16, kind: &str| -> ConfResult<Vec<(String, Value)>> {
            let mut out = Vec::new();
            if let Some(cs) = classes.get(&handle) {
                let keys = match kind {
                    "htb" => HTB_CLASS_KEYS,
                    "drr" => DRR_CLASS_KEYS,
                    _ => {
                        return Err(ConfError::new(
                            "tc",
                            format!("{kind} at {handle:x}: has no `tc class` lines to read"),
                        ))
                    }
                };
                let mut items = Vec::with_capacity(cs.len());
                for c in cs {
                    if c.kind != kind {
                        return Err(ConfError::new(
                            "tc",
                            format!(
                                "class {handle:x}:{:x} is a {} class under a {kind} qdisc",
                                c.minor, c.kind
                            ),
                        ));
                    }
                    let mut t = super::spec::tc_table(kind, &c.args, keys)?;
                    t.insert("classid", Value::Str(format!("{handle:x}:{:x}", c.minor)));
                    if c.parent_minor != 0 {
                        t.insert(
                            "parent",
                            Value::Str(format!("{handle:x}:{:x}", c.parent_minor)),
                        );
                    }
                    items.push(Value::Table(t));
                }
                out.push(("classes".to_string(), Value::Array(items)));
            }
            if let Some(fs) = filters.get(&handle) {
                out.push(("filters".to_string(), Value::Array(fs.clone())));
            }
            if kind == "htb" || kind == "drr" {
                out.push(("handle".to_string(), Value::Int(handle as i64)));
            }
            Ok(out)
        };
        from_tc_node(&nodes, root, ctx, &extra)
    }
}

/// `root handle 1: KIND ARGS` / `parent 1:10 handle 10: KIND ARGS`.
fn qdisc_line(line: &str, w: &[&str]) -> ConfResult<TcNode> {
    let (parent, rest) = match w.first() {
        Some(&"root") => (TcParent::Root, &w[1..]),
        Some(&"parent") if w.len() >= 2 => {
            let (maj, min) = classid(w[1]).ok_or_else(|| err(line, "bad parent"))?;
            (TcParent::Class(maj, min), &w[2..])
        }
        _ => return Err(err(line, "a qdisc line starts with `root` or `parent M:N`")),
    };
    let (handle, rest) = match rest {
        ["handle", h, rest @ ..] => (
            classid(h)
                .map(|(maj, _)| maj)
                .ok_or_else(|| err(line, "bad handle"))?,
            rest,
        ),
        _ => return Err(err(line, "a qdisc line needs `handle H:`")),
    };
    let Some((kind, args)) = rest.split_first() else {
        return Err(err(line, "no qdisc kind"));
    };
    let kind = super::KINDS
        .iter()
        .map(|k| k.name)
        .find(|n| n == kind)
        .ok_or_else(|| err(line, format!("unknown qdisc {kind:?}")))?;
    Ok(TcNode {
        parent,
        handle,
        kind,
        args: args.iter().map(|s| s.to_string()).collect(),
    })
}

/// `parent 1:[P] classid 1:M KIND ARGS`.
fn class_line(line: &str, w: &[&str]) -> ConfResult<(u16, ClassLine)> {
    let ["parent", p, "classid", c, kind, args @ ..] = w else {
        return Err(err(
            line,
            "a class line reads `parent H:[P] classid H:M KIND ARGS`",
        ));
    };
    let (pmaj, pmin) = classid(p).ok_or_else(|| err(line, "bad parent"))?;
    let (maj, min) = classid(c).ok_or_else(|| err(line, "bad classid"))?;
    if pmaj != maj {
        return Err(err(
            line,
            "the class and its parent belong to different qdiscs",
        ));
    }
    Ok((
        maj,
        ClassLine {
            parent_minor: pmin,
            minor: min,
            kind: kind.to_string(),
            args: args.iter().map(|s| s.to_string()).collect(),
        },
    ))
}

/// `parent H: protocol ip|ipv6 prio N u32 match ip|ip6 src|dst ADDR[/LEN] flowid H:M`.
fn filter_line(line: &str, w: &[&str]) -> ConfResult<(u16, Value)> {
    let ["parent", p, "protocol", _proto, "prio", _prio, "u32", "match", _fam, dir, addr, "flowid" | "classid", flow] =
        w
    else {
        return Err(err(
            line,
            "sojourn reads filter lines `parent H: protocol ip prio N u32 match ip dst \
             ADDR/32 flowid H:M`",
        ));
    };
    let (maj, _) = classid(p).ok_or_else(|| err(line, "bad parent"))?;
    if !matches!(*dir, "src" | "dst") {
        return Err(err(line, "the match is `src` or `dst`"));
    }
    let ip = addr.split('/').next().unwrap_or("");
    let full = match addr.split_once('/') {
        None => true,
        Some((a, l)) => {
            let bits = if a.contains(':') { "128" } else { "32" };
            l == bits
        }
    };
    if !full || ip.parse::<std::net::IpAddr>().is_err() {
        return Err(err(line, "sojourn matches one whole address (/32 or /128)"));
    }
    let t = Table(vec![
        (dir.to_string(), Value::Str(ip.to_string())),
        ("classid".to_string(), Value::Str(flow.to_string())),
    ]);
    Ok((maj, Value::Table(t)))
}

/// Qdisc nodes with each qdisc's classes right after it (before the qdiscs that hang from
/// them), then the filters: `(object, arguments after dev DEV)` in the order tc must run
/// them (`("qdisc", "root handle 1: htb default 30 …")`, `("class", "parent 1: classid
/// 1:1 htb …")`, `("filter", "parent 1: protocol ip …")`).
pub fn interleave(
    nodes: &[TcNode],
    classes: &[super::vocab::TcClass],
    filters: &[String],
) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(nodes.len() + classes.len() + filters.len());
    for n in nodes {
        out.push(("qdisc", n.to_string()));
        for c in classes.iter().filter(|c| c.parent == n.handle) {
            out.push(("class", c.to_string()));
        }
    }
    out.extend(filters.iter().map(|f| ("filter", f.clone())));
    out
}

impl QdiscSpec {
    /// The whole tree as tc lines, `(object, arguments after dev DEV)`: qdiscs, classes
    /// and filters in the order tc must run them (see [`interleave`]).
    pub fn tc_lines(&self) -> Result<Vec<(&'static str, String)>, super::NotLinux> {
        Ok(interleave(
            &self.dump()?,
            &self.dump_classes()?,
            &self.dump_filters()?,
        ))
    }
}
