//! A [`QdiscSpec`] tree as Linux sees it: the tc commands that realise it ([`QdiscSpec::dump`],
//! [`QdiscSpec::dump_shaped`]), or the one-line reason Linux cannot ([`QdiscSpec::linux`]),
//! and the reverse, a tc tree read back into a spec ([`QdiscSpec::from_tc`]).
//!
//! Each node's tc words come from its discipline's declaration
//! ([`Discipline::tc_args`](super::vocab::Discipline::tc_args), in tc's own syntax and units:
//! the `dump` Linux pairs with every qdisc's `change`); children hang under their parent's
//! classes ([`Classful`](super::Classful)). The reverse maps each tc keyword to the
//! experiment-file key (the declaration's [`TcKey`]s) and runs the discipline's own `parse`,
//! so `from_tc(dump(spec)) == spec` and a tc line is validated exactly like a file.

use super::vocab::{
    parse_tc_rate, parse_tc_size, parse_tc_time, tc_rate, BuildCtx, NotLinux, TcClass, TcKey,
    TcNode, TcParent, TcShaped, TcTree,
};
use super::QdiscSpec;
use crate::params::{ConfError, ConfResult, Table, Value};

impl QdiscSpec {
    /// Whether any discipline in the tree reads `pkt.ct_bytes`, so the node that feeds this
    /// link must run conntrack (an `age` with `count = "conntrack"`, anywhere).
    pub fn needs_conntrack(&self) -> bool {
        self.facts().needs_conntrack || self.children().iter().any(|c| c.needs_conntrack())
    }

    /// Whether any discipline in the tree cuts GSO buffers into segments itself
    /// ([`Facts::splits_gso`](super::vocab::Facts::splits_gso)). An engine that moves real
    /// frames (the live forwarder) cannot make a frame of a segment split off inside a qdisc.
    pub fn splits_gso(&self) -> bool {
        self.facts().splits_gso || self.children().iter().any(|c| c.splits_gso())
    }

    /// Whether Linux can run this whole tree as tc qdiscs; `Err` names the first part it
    /// cannot, with a one-line reason.
    pub fn linux(&self) -> Result<(), NotLinux> {
        self.dump()?;
        self.dump_classes()?;
        self.dump_filters().map(|_| ())
    }

    /// Every `tc class` line the tree needs (htb's and drr's classes, wherever they sit),
    /// parents before children; each names its qdisc by the handle [`QdiscSpec::dump`]
    /// gives it (htb and drr keep their own `handle`). A deploy writes a qdisc's classes
    /// right after the qdisc and before the qdiscs under them.
    pub fn dump_classes(&self) -> Result<Vec<TcClass>, NotLinux> {
        let mut out = self.tc_classes()?;
        for c in self.tc_children() {
            out.extend(c.dump_classes()?);
        }
        Ok(out)
    }

    /// Every `tc filter` line of the tree (arguments after `dev DEV`), written last.
    pub fn dump_filters(&self) -> Result<Vec<String>, NotLinux> {
        let mut out = self.tc_filters()?;
        for c in self.tc_children() {
            out.extend(c.dump_filters()?);
        }
        Ok(out)
    }

    /// The tree as tc commands: `tc qdisc replace dev X <node>` for each node, root first,
    /// children under their parent's class (`prio` band i = class `H:i+1`, `tbf` = `H:1`).
    pub fn dump(&self) -> Result<TcTree, NotLinux> {
        // Handles some qdiscs insist on (prio/CAKE compare theirs with skb->priority) are
        // kept; the others get the smallest majors left free (the root 1: if it can).
        let mut handles = Handles {
            taken: Vec::new(),
            next: 1,
        };
        self.insisted_handles(&mut handles.taken);
        let root_handle = self.own_handle().unwrap_or_else(|| handles.fresh());
        let mut out = Vec::new();
        self.dump_into(TcParent::Root, root_handle, &mut handles, &mut out)?;
        check_unique(&out)?;
        Ok(out)
    }

    /// This discipline behind a rate shaper, as Linux shapes a link on a fast device (the
    /// experiment's `shaper = true`): `root handle H: htb default 1`, one class `H:1` with
    /// `rate` = `ceil` = `rate_bps` (htb's own burst defaults), and this spec's tree under
    /// `H:1`. `H` is the first major the tree does not insist on.
    pub fn dump_shaped(&self, rate_bps: u64) -> Result<TcShaped, NotLinux> {
        self.dump_shaped_reserving(rate_bps, &[])
    }

    /// As [`QdiscSpec::dump_shaped`], with `reserved` majors kept free for the htb root: the
    /// majors of the `skb->priority` values a classifier sets in front of this link. htb
    /// sends a packet whose priority equals its own handle (`H:0`) to its direct queue,
    /// unshaped (`htb_classify`: "X:0 (direct flow) selected"), so a map writing `1:0` in
    /// front of an htb at `1:` would bypass the shaper.
    pub fn dump_shaped_reserving(
        &self,
        rate_bps: u64,
        reserved: &[u16],
    ) -> Result<TcShaped, NotLinux> {
        let mut handles = Handles {
            taken: reserved.to_vec(),
            next: 1,
        };
        self.insisted_handles(&mut handles.taken);
        let h = handles.fresh();
        let root = TcNode {
            parent: TcParent::Root,
            handle: h,
            kind: "htb",
            args: vec!["default".into(), "1".into()],
        };
        let class = TcClass {
            parent: h,
            parent_minor: 0,
            classid: (h, 1),
            kind: "htb",
            args: vec![
                "rate".into(),
                tc_rate(rate_bps),
                "ceil".into(),
                tc_rate(rate_bps),
            ],
        };
        let leaf_handle = self.own_handle().unwrap_or_else(|| handles.fresh());
        let mut leaf = Vec::new();
        self.dump_into(TcParent::Class(h, 1), leaf_handle, &mut handles, &mut leaf)?;
        check_unique(&leaf)?;
        Ok(TcShaped { root, class, leaf })
    }

    fn insisted_handles(&self, out: &mut Vec<u16>) {
        out.extend(self.own_handle());
        for c in self.children() {
            c.insisted_handles(out);
        }
    }

    /// A handle this spec insists on (prio's and CAKE's `handle`, which their classifiers
    /// compare with `skb->priority`).
    fn own_handle(&self) -> Option<u16> {
        self.facts().tc_handle
    }

    fn dump_into(
        &self,
        parent: TcParent,
        handle: u16,
        handles: &mut Handles,
        out: &mut TcTree,
    ) -> Result<(), NotLinux> {
        let (kind, args) = self.tc_args()?;
        out.push(TcNode {
            parent,
            handle,
            kind,
            args,
        });
        let minors = self.tc_child_minors();
        for (c, minor) in self.tc_children().iter().zip(minors) {
            let h = c.own_handle().unwrap_or_else(|| handles.fresh());
            c.dump_into(TcParent::Class(handle, minor), h, handles, out)?;
        }
        Ok(())
    }

    /// A spec from a tc tree (as [`QdiscSpec::dump`] writes it, or typed by hand):
    /// `from_tc(&spec.dump()?, ctx) == spec`. Errors name the node and keyword.
    pub fn from_tc(tree: &[TcNode], ctx: &BuildCtx) -> ConfResult<QdiscSpec> {
        let root = tree
            .iter()
            .position(|n| n.parent == TcParent::Root)
            .ok_or_else(|| ConfError::new("tc", "no root qdisc in the tree"))?;
        from_tc_node(tree, root, ctx, &|_, _| Ok(Vec::new()))
    }

    /// A spec from one tc qdisc's kind and arguments (no children: composites get their
    /// default children, as tc would create them).
    pub fn from_tc_args(kind: &str, args: &[&str], ctx: &BuildCtx) -> ConfResult<QdiscSpec> {
        let node = TcNode {
            parent: TcParent::Root,
            handle: 1,
            kind: tc_kind(kind)?,
            args: args.iter().map(|s| s.to_string()).collect(),
        };
        from_tc_node(&[node], 0, ctx, &|_, _| Ok(Vec::new()))
    }

    /// A short one-line description: the tc line where Linux can express the root, else
    /// the kind and its typed parameters.
    pub fn describe(&self) -> String {
        match self.tc_args() {
            Ok((k, a)) if a.is_empty() => k.to_string(),
            Ok((k, a)) => format!("{k} {}", a.join(" ")),
            Err(_) => format!("{self:?}"),
        }
    }
}

/// Handles are unique on a device; two qdiscs insisting on one cannot both be placed.
fn check_unique(tree: &[TcNode]) -> Result<(), NotLinux> {
    for (k, n) in tree.iter().enumerate() {
        if tree[..k].iter().any(|m| m.handle == n.handle) {
            return Err(NotLinux::new(
                n.kind,
                format!(
                    "its handle {:x}: is taken by another qdisc of the tree; give it its own \
                     `handle` (its skb->priority overrides match that major)",
                    n.handle
                ),
            ));
        }
    }
    Ok(())
}

/// Handle majors for the qdiscs of a tree that do not insist on one.
struct Handles {
    taken: Vec<u16>,
    next: u16,
}

impl Handles {
    fn fresh(&mut self) -> u16 {
        while self.taken.contains(&self.next) {
            self.next += 1;
        }
        self.taken.push(self.next);
        self.next
    }
}

fn tc_kind(kind: &str) -> ConfResult<&'static str> {
    super::KINDS
        .iter()
        .map(|k| k.name)
        .find(|n| *n == kind)
        .ok_or_else(|| ConfError::new("tc", format!("unknown qdisc {kind:?}")))
}

/// Turns tc arguments into an experiment-file parameter table, by `keys`.
pub fn tc_table(kind: &str, args: &[String], keys: &[TcKey]) -> ConfResult<Table> {
    let path = format!("tc {kind}");
    let mut t = Table::default();
    let mut i = 0;
    while i < args.len() {
        let w = args[i].as_str();
        let key = keys.iter().find(|k| k.word() == w).ok_or_else(|| {
            let words: Vec<&str> = keys.iter().map(|k| k.word()).collect();
            let hint = crate::params::closest(w, &words)
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            ConfError::new(&path, format!("unknown keyword {w:?}{hint}"))
        })?;
        let value = |i: &mut usize| -> ConfResult<&str> {
            *i += 1;
            args.get(*i)
                .map(|s| s.as_str())
                .ok_or_else(|| ConfError::new(&path, format!("`{w}` needs a value")))
        };
        let bad = |what: &str, v: &str| ConfError::new(&path, format!("`{w}`: {what} {v:?}"));
        match *key {
            TcKey::Int(_, k) => {
                let v = value(&mut i)?;
                let n: i64 = v
                    .trim_end_matches('p')
                    .parse()
                    .map_err(|_| bad("expected an integer, got", v))?;
                t.insert(k, Value::Int(n));
            }
            TcKey::Size(_, k) => {
                let v = value(&mut i)?;
                let n = parse_tc_size(v).ok_or_else(|| bad("expected a size, got", v))?;
                t.insert(k, Value::Int(n as i64));
            }
            TcKey::Time(_, k) => {
                let v = value(&mut i)?;
                let d = parse_tc_time(v).ok_or_else(|| bad("expected a time, got", v))?;
                t.insert(k, Value::Str(format!("{}ns", d.as_ns())));
            }
            TcKey::Rate(_, k) => {
                let v = value(&mut i)?;
                if v == "unlimited" {
                    // `tc qdisc show` prints CAKE's unshaped rate as `bandwidth unlimited`.
                    t.insert(k, Value::Str(v.to_string()));
                    i += 1;
                    continue;
                }
                let bps = parse_tc_rate(v).ok_or_else(|| bad("expected a rate, got", v))?;
                t.insert(k, Value::Str(format!("{bps}bit")));
            }
            TcKey::Text(_, k) => {
                let v = value(&mut i)?;
                t.insert(k, Value::Str(v.to_string()));
            }
            TcKey::Flag(_, k, b) => t.insert(k, Value::Bool(b)),
            TcKey::Choice(_, k, c) => t.insert(k, Value::Str(c.to_string())),
            TcKey::Ints(_, k, n) => {
                let mut xs = Vec::with_capacity(n);
                for _ in 0..n {
                    let v = value(&mut i)?;
                    xs.push(Value::Int(
                        v.parse().map_err(|_| bad("expected an integer, got", v))?,
                    ));
                }
                t.insert(k, Value::Array(xs));
            }
            TcKey::Secs(_, k) => {
                let v = value(&mut i)?;
                let n: i64 = v
                    .trim_end_matches("sec")
                    .parse()
                    .map_err(|_| bad("expected whole seconds, got", v))?;
                t.insert(k, Value::Int(n));
            }
            TcKey::Ignore(_, n) => {
                for _ in 0..n {
                    value(&mut i)?;
                }
            }
            TcKey::Real(_, k) => {
                let v = value(&mut i)?;
                let x: f64 = v.parse().map_err(|_| bad("expected a number, got", v))?;
                t.insert(k, Value::Float(x));
            }
        }
        i += 1;
    }
    Ok(t)
}

/// The extra keys a node's table gets from lines that are not qdisc nodes (htb's and drr's
/// `tc class` and `tc filter` lines: `classes`, `filters`), by the node's handle and kind.
pub type TcExtra<'a> = &'a dyn Fn(u16, &str) -> ConfResult<Vec<(String, Value)>>;

/// Parses a `TcNode` (and its children in `tree`) into a spec.
pub(crate) fn from_tc_node(
    tree: &[TcNode],
    idx: usize,
    ctx: &BuildCtx,
    extra: TcExtra,
) -> ConfResult<QdiscSpec> {
    let node = &tree[idx];
    let kind = super::KINDS.iter().find(|k| k.name == node.kind);
    let Some((kind, keys)) = kind.and_then(|k| Some((k, k.tc_keys?))) else {
        return Err(ConfError::new(
            "tc",
            format!("{} is not a Linux qdisc sojourn reads back", node.kind),
        ));
    };
    let mut table = tc_table(node.kind, &node.args, keys)?;
    table.insert("kind", Value::Str(node.kind.to_string()));
    for (k, v) in extra(node.handle, node.kind)? {
        table.insert(&k, v);
    }
    if tree.iter().filter(|n| n.handle == node.handle).count() > 1 {
        return Err(ConfError::new(
            "tc",
            format!("handle {:x}: is used twice", node.handle),
        ));
    }
    let children: Vec<usize> = (0..tree.len())
        .filter(|&j| matches!(tree[j].parent, TcParent::Class(maj, _) if maj == node.handle))
        .collect();
    if let Some(key) = kind.tc_handle_key.filter(|_| node.handle != 1) {
        table.insert(key, Value::Int(node.handle as i64));
    }
    if !children.is_empty() {
        let child_specs: Vec<(u16, QdiscSpec)> = children
            .iter()
            .map(|&j| {
                let minor = match tree[j].parent {
                    TcParent::Class(_, m) => m,
                    TcParent::Root => 0,
                };
                Ok((minor, from_tc_node(tree, j, ctx, extra)?))
            })
            .collect::<ConfResult<_>>()?;
        return attach_children(table, child_specs, ctx);
    }
    QdiscSpec::parse(&Value::Table(table), "tc", ctx)
}

/// A composite from its own tc arguments and its children's specs (by class minor).
fn attach_children(
    table: Table,
    mut children: Vec<(u16, QdiscSpec)>,
    ctx: &BuildCtx,
) -> ConfResult<QdiscSpec> {
    children.sort_by_key(|(m, _)| *m);
    let mut spec = QdiscSpec::parse(&Value::Table(table), "tc", ctx)?;
    spec.attach(children)?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::vocab::{tc_size, tc_time};
    use crate::qdisc::{cake, AnyQdisc};
    use crate::time::Duration;

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }
    fn i(x: i64) -> Value {
        Value::Int(x)
    }
    fn b(x: bool) -> Value {
        Value::Bool(x)
    }

    fn spec(kind: &str, pairs: &[(&str, Value)]) -> QdiscSpec {
        let mut t = Table::default();
        t.insert("kind", s(kind));
        for (k, v) in pairs {
            t.insert(k, v.clone());
        }
        QdiscSpec::parse(&Value::Table(t), "q", &BuildCtx::default()).unwrap()
    }

    fn default_of(kind: &str) -> QdiscSpec {
        QdiscSpec::parse(&s(kind), "q", &BuildCtx::default()).unwrap()
    }

    /// `tc` words of a line, as a shell would split it.
    fn words(line: &str) -> Vec<&str> {
        line.split_whitespace().collect()
    }

    fn args_line(q: &QdiscSpec) -> String {
        q.tc_args().unwrap().1.join(" ")
    }

    /// dump → from_tc gives the spec back, and the spec is not the default (so the
    /// round trip really carried the parameters).
    fn round_trip(q: &QdiscSpec) {
        let tree = q.dump().unwrap_or_else(|e| panic!("{e}"));
        let back = QdiscSpec::from_tc(&tree, &BuildCtx::default())
            .unwrap_or_else(|e| panic!("{e}\n{tree:#?}"));
        assert_eq!(&back, q, "tc tree: {tree:#?}");
        // (red and tbf have no defaults: tc requires their limit/rate.)
        if let Ok(d) = QdiscSpec::parse(&s(q.kind()), "q", &BuildCtx::default()) {
            assert_ne!(q, &d, "{} test spec is the default", q.kind());
        }
    }

    #[test]
    fn every_linux_discipline_round_trips_with_non_default_parameters() {
        let cases = vec![
            spec("pfifo", &[("limit", i(77))]),
            spec("pfifo_head_drop", &[("limit", i(31))]),
            spec("bfifo", &[("limit", s("90KB"))]),
            spec("bfifo", &[("limit", s("64KiB"))]),
            spec(
                "codel",
                &[
                    ("limit", i(200)),
                    ("target", s("2ms")),
                    ("interval", s("40ms")),
                    ("ecn", b(true)),
                    ("ce_threshold", s("500us")),
                ],
            ),
            spec(
                "fq_codel",
                &[
                    ("limit", i(500)),
                    ("flows", i(64)),
                    ("quantum", i(300)),
                    ("target", s("1500us")),
                    ("interval", s("30ms")),
                    ("ecn", b(false)),
                    ("ce_threshold", s("1ms")),
                    ("memory_limit", s("4MiB")),
                    ("drop_batch", i(16)),
                ],
            ),
            spec(
                "fq",
                &[
                    ("limit", i(2000)),
                    ("flow_limit", i(20)),
                    ("quantum", i(3028)),
                    ("initial_quantum", i(6000)),
                    ("maxrate", s("5Mbit")),
                    ("pacing", b(false)),
                    ("buckets", i(256)),
                    ("orphan_mask", i(511)),
                    ("low_rate_threshold", s("1Mbit")),
                    ("refill_delay", s("20ms")),
                    ("horizon", s("2s")),
                    ("horizon_drop", b(false)),
                    ("ce_threshold", s("3ms")),
                    ("weights", Value::Array(vec![i(100000), i(50000), i(20000)])),
                    ("priomap", Value::Array((0..16).map(|p| i(p % 3)).collect())),
                ],
            ),
            spec(
                "cake",
                &[
                    ("bandwidth", s("100Mbit")),
                    ("diffserv", s("besteffort")),
                    ("flow_mode", s("dual-dsthost")),
                    ("nat", b(true)),
                    ("wash", b(true)),
                    ("ingress", b(true)),
                    ("ack_filter", s("ack-filter-aggressive")),
                    ("split_gso", b(false)),
                    ("rtt", s("20ms")),
                    ("overhead_preset", s("docsis")),
                    ("memlimit", s("8MiB")),
                ],
            ),
            spec(
                "cake",
                &[
                    ("rtt", s("internet")),
                    ("overhead_preset", s("pppoe-ptm")),
                    ("ether_vlan", i(1)),
                    ("ack_filter", s("ack-filter")),
                    ("handle", i(0x20)),
                ],
            ),
            spec(
                "cake",
                &[
                    ("bandwidth", s("20Mbit")),
                    ("atm", s("atm")),
                    ("overhead_preset", s("raw")),
                ],
            ),
            spec(
                "pie",
                &[
                    ("limit", i(300)),
                    ("target", s("3ms")),
                    ("tupdate", s("10ms")),
                    ("alpha", i(4)),
                    ("beta", i(30)),
                    ("ecn", b(true)),
                    ("bytemode", b(true)),
                    ("dq_rate_estimator", b(true)),
                ],
            ),
            spec(
                "fq_pie",
                &[
                    ("limit", i(5000)),
                    ("flows", i(128)),
                    ("quantum", i(3028)),
                    ("target", s("2ms")),
                    ("tupdate", s("5ms")),
                    ("ecn", b(true)),
                    ("ecn_prob", i(20)),
                    ("memory_limit", s("16MiB")),
                ],
            ),
            spec(
                "dualpi2",
                &[
                    ("limit", i(500)),
                    ("memlimit", i(2_000_000)),
                    ("target", s("5ms")),
                    ("tupdate", s("8ms")),
                    ("alpha", Value::Float(0.32)),
                    ("beta", Value::Float(6.4)),
                    ("step_thresh", s("3p")),
                    ("min_qlen_step", i(2)),
                    ("coupling_factor", i(3)),
                    ("drop_on_overload", b(false)),
                    ("drop_enqueue", b(true)),
                    ("classic_protection", i(25)),
                    ("ecn_mask", s("any_ect")),
                    ("split_gso", b(false)),
                ],
            ),
            spec("dualpi2", &[("step_thresh", s("500us"))]),
            spec("dualpi2", &[("max_rtt", s("20ms"))]),
            spec(
                "sfq",
                &[
                    ("limit", i(100)),
                    ("depth", i(20)),
                    ("divisor", i(256)),
                    ("flows", i(64)),
                    ("quantum", i(3000)),
                    ("perturb", i(10)),
                    ("headdrop", b(true)),
                    ("redflowlimit", i(40000)),
                    ("probability", Value::Float(0.05)),
                    ("ecn", b(true)),
                    ("harddrop", b(true)),
                ],
            ),
            spec(
                "red",
                &[
                    ("limit", s("400KB")),
                    ("min", s("30KB")),
                    ("max", s("90KB")),
                    ("avpkt", i(1000)),
                    ("burst", i(55)),
                    ("probability", Value::Float(0.1)),
                    ("bandwidth", s("20Mbit")),
                    ("ecn", b(true)),
                    ("adaptive", b(true)),
                    ("harddrop", b(true)),
                ],
            ),
            spec(
                "prio",
                &[
                    ("bands", i(4)),
                    (
                        "priomap",
                        Value::Array((0..16).map(|p| i(3 - p % 4)).collect()),
                    ),
                    (
                        "children",
                        Value::Array(vec![
                            s("fq_codel"),
                            s("pfifo"),
                            Value::Table(Table(vec![
                                ("kind".into(), s("codel")),
                                ("target".into(), s("1ms")),
                            ])),
                            s("sfq"),
                        ]),
                    ),
                ],
            ),
            spec(
                "prio",
                &[
                    ("handle", i(5)),
                    (
                        "child",
                        Value::Table(Table(vec![
                            ("kind".into(), s("tbf")),
                            ("rate".into(), s("1Mbit")),
                            ("burst".into(), s("10KB")),
                            ("child".into(), s("fq_codel")),
                        ])),
                    ),
                ],
            ),
            spec(
                "tbf",
                &[
                    ("rate", s("10Mbit")),
                    ("burst", s("32KiB")),
                    ("limit", s("100KB")),
                ],
            ),
            spec(
                "tbf",
                &[
                    ("rate", s("10Mbit")),
                    ("burst", s("32KiB")),
                    ("peakrate", s("12Mbit")),
                    ("mtu", i(1514)),
                    ("latency", s("50ms")),
                ],
            ),
            spec(
                "tbf",
                &[
                    ("rate", s("50Mbit")),
                    ("burst", s("64KiB")),
                    (
                        "child",
                        Value::Table(Table(vec![
                            ("kind".into(), s("cake")),
                            ("handle".into(), i(2)),
                        ])),
                    ),
                ],
            ),
        ];
        let mut kinds: Vec<&str> = cases.iter().map(|c| c.kind()).collect();
        kinds.sort();
        kinds.dedup();
        // Every discipline Linux can express (pfifo_fast has no parameters; see below).
        assert_eq!(
            kinds,
            [
                "bfifo",
                "cake",
                "codel",
                "dualpi2",
                "fq",
                "fq_codel",
                "fq_pie",
                "pfifo",
                "pfifo_head_drop",
                "pie",
                "prio",
                "red",
                "sfq",
                "tbf"
            ]
        );
        for c in &cases {
            round_trip(c);
        }
        // pfifo_fast: no parameters; its band size is the device's tx_queue_len.
        let pf = default_of("pfifo_fast");
        let tree = pf.dump().unwrap();
        assert_eq!(tree[0].to_string(), "root handle 1: pfifo_fast");
        assert_eq!(QdiscSpec::from_tc(&tree, &BuildCtx::default()).unwrap(), pf);
    }

    #[test]
    fn fq_codel_default_matches_tc_qdisc_show_on_linux() {
        // What `tc qdisc show` prints for a default fq_codel (iproute2 ≥ 4.x, kernel ≥ 4.x):
        let shown = "limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms \
                     memory_limit 32Mb ecn drop_batch 64";
        let q = default_of("fq_codel");
        let read = QdiscSpec::from_tc_args("fq_codel", &words(shown), &BuildCtx::default());
        assert_eq!(read.unwrap(), q);
        // The dump is tc's input syntax: the same words without show's `p` suffix.
        assert_eq!(
            args_line(&q),
            "limit 10240 flows 1024 quantum 1514 target 5ms interval 100ms \
             memory_limit 32Mb ecn drop_batch 64"
        );
    }

    #[test]
    fn codel_and_cake_defaults_match_tc_qdisc_show() {
        let codel = default_of("codel");
        let shown = "limit 1000p target 5ms interval 100ms";
        assert_eq!(
            QdiscSpec::from_tc_args("codel", &words(shown), &BuildCtx::default()).unwrap(),
            codel
        );
        assert_eq!(args_line(&codel), "limit 1000 target 5ms interval 100ms");

        // sch_cake defaults as `tc qdisc show` prints them (tc-cake(8), q_cake.c order).
        let cake = default_of("cake");
        let shown = "bandwidth unlimited diffserv3 triple-isolate nonat nowash no-ack-filter \
                     split-gso rtt 100ms raw overhead 0";
        assert_eq!(
            QdiscSpec::from_tc_args("cake", &words(shown), &BuildCtx::default()).unwrap(),
            cake
        );
        // Input syntax: the unshaped rate is the keyword `unlimited` alone.
        assert_eq!(
            args_line(&cake),
            "unlimited diffserv3 triple-isolate nonat nowash no-ack-filter split-gso \
             rtt 100ms raw overhead 0"
        );
        let shaped = spec(
            "cake",
            &[("bandwidth", s("100Mbit")), ("diffserv", s("besteffort"))],
        );
        assert_eq!(
            args_line(&shaped),
            "bandwidth 100Mbit besteffort triple-isolate nonat nowash no-ack-filter \
             split-gso rtt 100ms raw overhead 0"
        );
        // docsis: overhead 18, mpu 64, compensation on (so `noatm`, not `raw`).
        let docsis = spec("cake", &[("overhead_preset", s("docsis"))]);
        assert!(
            args_line(&docsis).ends_with("rtt 100ms noatm overhead 18 mpu 64"),
            "{}",
            args_line(&docsis)
        );
    }

    #[test]
    fn composites_dump_as_a_tree_of_handles() {
        let q = spec(
            "prio",
            &[
                ("bands", i(2)),
                ("priomap", Value::Array((0..16).map(|p| i(p % 2)).collect())),
                ("child", s("pfifo")),
            ],
        );
        let lines: Vec<String> = q.dump().unwrap().iter().map(|n| n.to_string()).collect();
        assert_eq!(
            lines,
            [
                "root handle 1: prio bands 2 priomap 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1",
                "parent 1:1 handle 2: pfifo limit 1000",
                "parent 1:2 handle 3: pfifo limit 1000",
            ]
        );
        // Linux's default prio priomap (tc-prio(8)): 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1.
        assert_eq!(
            args_line(&default_of("prio")),
            "bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"
        );
        let t = spec(
            "tbf",
            &[
                ("rate", s("10Mbit")),
                ("burst", s("32KiB")),
                ("child", s("fq_codel")),
            ],
        );
        let lines: Vec<String> = t.dump().unwrap().iter().map(|n| n.to_string()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0],
            "root handle 1: tbf rate 10Mbit burst 32Kb limit 32Kb"
        );
        assert!(lines[1].starts_with("parent 1:1 handle 2: fq_codel limit 10240 "));
        // A child insisting on 1: (CAKE's default handle) keeps it; tbf takes the next.
        let shaped = spec(
            "tbf",
            &[
                ("rate", s("1Mbit")),
                ("burst", i(3000)),
                ("child", s("cake")),
            ],
        );
        let tree = shaped.dump().unwrap();
        assert_eq!(
            tree[0].to_string(),
            "root handle 2: tbf rate 1Mbit burst 3000b limit 3000b"
        );
        assert!(tree[1]
            .to_string()
            .starts_with("parent 2:1 handle 1: cake unlimited "));
        assert_eq!(
            QdiscSpec::from_tc(&tree, &BuildCtx::default()).unwrap(),
            shaped
        );
        // tbf's own limit makes its bfifo: one line, no child.
        let t = spec(
            "tbf",
            &[
                ("rate", s("8Mbit")),
                ("burst", i(5000)),
                ("limit", i(100000)),
            ],
        );
        let tree = t.dump().unwrap();
        assert_eq!(tree.len(), 1);
        assert_eq!(
            tree[0].to_string(),
            "root handle 1: tbf rate 8Mbit burst 5000b limit 100000b"
        );
    }

    /// Random parameters (within each discipline's ranges) round-trip through tc:
    /// `from_tc(dump(spec)) == spec` for 300 specs per discipline.
    #[test]
    fn random_specs_round_trip_through_tc() {
        use crate::rng::Rng;
        let mut r = Rng::from_seed(20_261_125);
        let us = |r: &mut Rng, lo: u64, hi: u64| s(&format!("{}us", lo + r.below(hi - lo)));
        let pick = |r: &mut Rng, xs: &[&str]| s(xs[r.below(xs.len() as u64) as usize]);
        let mut checked = 0;
        for _ in 0..300 {
            let mut cases: Vec<(&str, Vec<(&str, Value)>)> = vec![
                ("pfifo", vec![("limit", i(1 + r.below(100_000) as i64))]),
                ("bfifo", vec![("limit", i(1 + r.below(1 << 30) as i64))]),
                (
                    "codel",
                    vec![
                        ("limit", i(1 + r.below(20_000) as i64)),
                        ("target", us(&mut r, 1, 50_000)),
                        ("interval", us(&mut r, 1, 2_000_000)),
                        ("ecn", b(r.chance(0.5))),
                    ],
                ),
                (
                    "fq_codel",
                    vec![
                        ("limit", i(1 + r.below(100_000) as i64)),
                        ("flows", i(1 + r.below(65_536) as i64)),
                        ("quantum", i(r.below(1 << 20) as i64)),
                        ("target", us(&mut r, 1, 50_000)),
                        ("interval", us(&mut r, 1, 2_000_000)),
                        ("ecn", b(r.chance(0.5))),
                        ("memory_limit", i(1 + r.below(1 << 32) as i64)),
                        ("drop_batch", i(r.below(1000) as i64)),
                    ],
                ),
                (
                    "pie",
                    vec![
                        ("limit", i(1 + r.below(100_000) as i64)),
                        ("target", us(&mut r, 1, 100_000)),
                        ("tupdate", us(&mut r, 1, 100_000)),
                        ("alpha", i(1 + r.below(32) as i64)),
                        ("beta", i(1 + r.below(32) as i64)),
                        ("ecn", b(r.chance(0.5))),
                        ("bytemode", b(r.chance(0.5))),
                        ("dq_rate_estimator", b(r.chance(0.5))),
                    ],
                ),
                (
                    "dualpi2",
                    vec![
                        ("limit", i(1 + r.below(100_000) as i64)),
                        ("memlimit", i(1 + r.below(1 << 32) as i64)),
                        ("target", us(&mut r, 1, 100_000)),
                        ("tupdate", us(&mut r, 1, 100_000)),
                        ("alpha", Value::Float((1 + r.below(4096)) as f64 / 256.0)),
                        ("beta", Value::Float((1 + r.below(1 << 20)) as f64 / 256.0)),
                        (
                            "step_thresh",
                            if r.chance(0.5) {
                                s(&format!("{}p", 1 + r.below(1000)))
                            } else {
                                us(&mut r, 1, 50_000)
                            },
                        ),
                        ("min_qlen_step", i(r.below(100) as i64)),
                        ("coupling_factor", i(1 + r.below(255) as i64)),
                        ("drop_on_overload", b(r.chance(0.5))),
                        ("drop_enqueue", b(r.chance(0.5))),
                        ("classic_protection", i(r.below(101) as i64)),
                        ("ecn_mask", pick(&mut r, &["l4s_ect", "any_ect"])),
                        ("split_gso", b(r.chance(0.5))),
                    ],
                ),
                (
                    "cake",
                    vec![
                        (
                            "bandwidth",
                            s(&format!("{}bit", 8 * (1 + r.below(1 << 34)))),
                        ),
                        ("rtt", us(&mut r, 1, 5_000_000)),
                        (
                            "diffserv",
                            pick(
                                &mut r,
                                &[
                                    "besteffort",
                                    "diffserv3",
                                    "diffserv4",
                                    "diffserv8",
                                    "precedence",
                                ],
                            ),
                        ),
                        ("flow_mode", pick(&mut r, &cake::FlowMode::NAMES)),
                        (
                            "overhead_preset",
                            pick(
                                &mut r,
                                &["raw", "conservative", "pppoe-ptm", "ethernet", "docsis"],
                            ),
                        ),
                        ("mpu", i(r.below(257) as i64)),
                        ("atm", pick(&mut r, &["none", "atm", "ptm"])),
                        ("nat", b(r.chance(0.5))),
                        ("wash", b(r.chance(0.5))),
                        ("ingress", b(r.chance(0.5))),
                        ("split_gso", b(r.chance(0.5))),
                        (
                            "ack_filter",
                            pick(&mut r, &["none", "ack-filter", "ack-filter-aggressive"]),
                        ),
                        ("memlimit", i(r.below(1 << 32) as i64)),
                    ],
                ),
                (
                    "sfq",
                    vec![
                        ("limit", i(2 + r.below(500) as i64)),
                        ("depth", i(1 + r.below(200) as i64)),
                        ("flows", i(1 + r.below(200) as i64)),
                        ("divisor", i(1 << (1 + r.below(16)))),
                        ("quantum", i(1 + r.below(200_000) as i64)),
                        ("perturb", i(r.below(60) as i64)),
                        ("headdrop", b(r.chance(0.5))),
                    ],
                ),
            ];
            // Leave some keys out at random, so defaults are exercised too.
            for (_, kv) in cases.iter_mut() {
                kv.retain(|_| r.chance(0.8));
            }
            for (kind, kv) in cases {
                let mut t = Table::default();
                t.insert("kind", s(kind));
                for (k, v) in kv {
                    t.insert(k, v);
                }
                // Out-of-range draws are the parser's business, not this test's.
                let Ok(q) = QdiscSpec::parse(&Value::Table(t), "q", &BuildCtx::default()) else {
                    continue;
                };
                let tree = q.dump().unwrap_or_else(|e| panic!("{e}: {q:?}"));
                let back = QdiscSpec::from_tc(&tree, &BuildCtx::default())
                    .unwrap_or_else(|e| panic!("{e}: {tree:?}"));
                assert_eq!(back, q, "{tree:?}");
                checked += 1;
            }
        }
        assert!(checked > 1500, "only {checked} specs were valid");
    }

    #[test]
    fn documented_lines_are_what_dump_writes() {
        // docs/disciplines/red.md: tc's derivation max = limit/4, min = max/3,
        // burst = (2·min + max) / (3·avpkt), avpkt 1000, probability 0.02 (tc-red(8)).
        assert_eq!(
            args_line(&spec("red", &[("limit", s("400KB"))])),
            "limit 400000b min 33333b max 100000b avpkt 1000b burst 55 probability 0.02 \
             bandwidth 10Mbit"
        );
        // docs/disciplines/tbf.md
        assert_eq!(
            args_line(&spec(
                "tbf",
                &[
                    ("rate", s("10Mbit")),
                    ("burst", s("32KiB")),
                    ("limit", s("100KB"))
                ]
            )),
            "rate 10Mbit burst 32Kb limit 100000b"
        );
        // docs/disciplines/{pie,fq_pie,sfq,fq}.md
        assert_eq!(
            args_line(&default_of("pie")),
            "limit 1000 target 15ms tupdate 15ms alpha 2 beta 20"
        );
        assert_eq!(
            args_line(&default_of("fq_pie")),
            "limit 10240 flows 1024 target 15ms tupdate 15ms alpha 2 beta 20 quantum 1514 \
             memory_limit 32Mb ecn_prob 10"
        );
        assert_eq!(
            args_line(&default_of("sfq")),
            "quantum 1514 depth 127 flows 128 divisor 1024 perturb 0"
        );
        assert_eq!(
            args_line(&default_of("fq")),
            "limit 10000 flow_limit 100 buckets 1024 orphan_mask 1023 pacing quantum 3028 \
             initial_quantum 15140 low_rate_threshold 550Kbit refill_delay 40ms horizon 10s \
             horizon_drop"
        );
    }

    #[test]
    fn a_shaped_link_is_htb_with_the_discipline_under_its_class() {
        let q = default_of("fq_codel");
        let sh = q.dump_shaped(10_000_000).unwrap();
        assert_eq!(sh.root.to_string(), "root handle 1: htb default 1");
        assert_eq!(
            sh.class.to_string(),
            "parent 1: classid 1:1 htb rate 10Mbit ceil 10Mbit"
        );
        assert_eq!(sh.leaf.len(), 1);
        assert!(sh.leaf[0]
            .to_string()
            .starts_with("parent 1:1 handle 2: fq_codel limit 10240 "));
        // CAKE keeps its handle 1:, so htb moves to 2:.
        let sh = default_of("cake").dump_shaped(1_000_000_000).unwrap();
        assert_eq!(sh.root.to_string(), "root handle 2: htb default 1");
        assert_eq!(
            sh.class.to_string(),
            "parent 2: classid 2:1 htb rate 1Gbit ceil 1Gbit"
        );
        assert!(sh.leaf[0]
            .to_string()
            .starts_with("parent 2:1 handle 1: cake "));
        assert_eq!(default_of("las").dump_shaped(1000).unwrap_err().kind, "las");
    }

    #[test]
    fn a_shaped_link_keeps_htb_off_the_classifier_majors() {
        // Seed 000's pfifo_fast map writes 1:6 and 1:0; an htb at 1: would send every 1:0
        // packet to its unshaped direct queue (htb_classify), so htb must take 2:.
        let sh = default_of("pfifo_fast")
            .dump_shaped_reserving(100_000_000, &[1])
            .unwrap();
        assert_eq!(sh.root.to_string(), "root handle 2: htb default 1");
        assert_eq!(
            sh.class.to_string(),
            "parent 2: classid 2:1 htb rate 100Mbit ceil 100Mbit"
        );
        assert_eq!(sh.leaf[0].to_string(), "parent 2:1 handle 3: pfifo_fast");
        // Several reserved majors, and the ones the tree insists on (CAKE 1:), all skipped.
        let sh = default_of("cake")
            .dump_shaped_reserving(1_000_000, &[2, 3])
            .unwrap();
        assert_eq!(sh.root.to_string(), "root handle 4: htb default 1");
        assert!(sh.leaf[0]
            .to_string()
            .starts_with("parent 4:1 handle 1: cake "));
    }

    #[test]
    fn sojourn_only_disciplines_and_switches_are_refused_with_a_reason() {
        for kind in ["lstf_codel", "cocoa", "las", "srpt"] {
            let e = default_of(kind).dump().unwrap_err();
            assert_eq!(e.kind, kind);
            assert!(e.reason.contains("sojourn emulate"), "{e}");
        }
        // age by priority is prio with every unmatched priority in the last band.
        let by_prio = spec(
            "age",
            &[
                ("count", s("priority")),
                ("levels", i(3)),
                ("handle", i(7)),
                ("child", s("fq_codel")),
            ],
        );
        let tree = by_prio.dump().unwrap();
        assert_eq!(
            tree[0].to_string(),
            "root handle 7: prio bands 3 priomap 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2 2"
        );
        assert_eq!(tree.len(), 4);
        match QdiscSpec::from_tc(&tree, &BuildCtx::default()).unwrap() {
            QdiscSpec::Prio(p) => {
                assert_eq!((p.bands, p.handle, p.priomap), (3, 7, [2; 16]));
                assert_eq!(p.children, vec![default_of("fq_codel"); 3]);
            }
            other => panic!("{other:?}"),
        }
        let age = spec("age", &[("thresholds", i(1_000_000))]);
        let e = age.dump().unwrap_err();
        assert_eq!(e.kind, "age");
        assert!(e.reason.contains("ct bytes"), "{e}");
        let e = spec("fq_codel", &[("new_flow_priority", b(false))])
            .linux()
            .unwrap_err();
        assert!(e.reason.contains("new_flow_priority"), "{e}");
        let e = spec("fq_codel", &[("starvation_prevention", b(false))])
            .linux()
            .unwrap_err();
        assert!(e.reason.contains("starvation_prevention"), "{e}");
        let e = spec("cake", &[("tin_mode", s("strict"))])
            .linux()
            .unwrap_err();
        assert!(e.reason.contains("tin_mode"), "{e}");
        let e = spec("cake", &[("target", s("1ms"))]).linux().unwrap_err();
        assert!(e.reason.contains("target"), "{e}");
        // A refusal deep in a composite names the child.
        let e = spec("prio", &[("child", s("srpt"))]).dump().unwrap_err();
        assert_eq!(e.kind, "srpt");
        // CAKE's (and prio's) handle is semantic: two of them cannot share one.
        let e = spec("prio", &[("child", s("cake"))]).dump().unwrap_err();
        assert_eq!(e.kind, "cake");
        assert!(e.reason.contains("handle 1:"), "{e}");
        // tc's time unit is the microsecond.
        let e = spec("codel", &[("target", s("1500ns"))])
            .dump()
            .unwrap_err();
        assert!(e.reason.contains("microseconds"), "{e}");
    }

    #[test]
    fn age_by_priority_and_its_prio_line_schedule_alike() {
        use crate::qdisc::{testkit::pkt, Drops, Qdisc};
        use crate::time::Time;
        let age = spec(
            "age",
            &[("count", s("priority")), ("levels", i(3)), ("handle", i(7))],
        );
        let prio = QdiscSpec::from_tc(&age.dump().unwrap(), &BuildCtx::default()).unwrap();
        let (mut a, mut p) = (
            age.build(&BuildCtx::default()),
            prio.build(&BuildCtx::default()),
        );
        // Priorities: 7:1..7:3 pick bands 0..2; 7:0, 7:9, other majors and plain
        // priorities all land in the last band.
        let prios = [
            0x70002, 0x10001, 0x70001, 6, 0x70000, 0x70003, 0x70009, 0x70001, 0,
        ];
        let mut d = Drops::new();
        for (uid, &pr) in prios.iter().enumerate() {
            let mut x = pkt(uid as u64, 1, 100);
            x.priority = pr;
            a.enqueue(x, Time::ZERO, &mut d);
            p.enqueue(x, Time::ZERO, &mut d);
        }
        let order = |q: &mut AnyQdisc| -> Vec<u64> {
            let mut d = Drops::new();
            let mut bound = crate::qdisc::testkit::Bound::new(100, "drain");
            std::iter::from_fn(|| {
                bound.tick();
                q.dequeue(Time::ZERO, &mut d).packet().map(|x| x.uid)
            })
            .collect()
        };
        let got = order(&mut a);
        assert_eq!(got, order(&mut p));
        assert_eq!(got, [2, 7, 0, 1, 3, 4, 5, 6, 8]);
    }

    #[test]
    fn needs_conntrack_looks_through_the_whole_tree() {
        let age_ct = || {
            Value::Table(Table(vec![
                ("kind".into(), s("age")),
                ("thresholds".into(), i(6331208)),
            ]))
        };
        assert!(spec("age", &[("thresholds", i(1000))]).needs_conntrack());
        assert!(!spec("age", &[("thresholds", i(1000)), ("count", s("qdisc"))]).needs_conntrack());
        assert!(!spec("age", &[("count", s("priority"))]).needs_conntrack());
        assert!(spec("prio", &[("child", age_ct())]).needs_conntrack());
        assert!(spec(
            "tbf",
            &[
                ("rate", s("1Mbit")),
                ("burst", i(3000)),
                ("child", age_ct())
            ]
        )
        .needs_conntrack());
        assert!(!default_of("fq_codel").needs_conntrack());
        assert!(!spec("prio", &[("child", s("fq_codel"))]).needs_conntrack());
    }

    #[test]
    fn splits_gso_looks_through_the_whole_tree() {
        // Linux's cake and dualpi2 split GSO buffers by default (`split-gso`); tbf segments
        // a buffer larger than its burst (tbf_segment).
        assert!(default_of("cake").splits_gso());
        assert!(!spec("cake", &[("split_gso", b(false))]).splits_gso());
        assert!(default_of("dualpi2").splits_gso());
        assert!(!spec("dualpi2", &[("split_gso", b(false))]).splits_gso());
        let tbf = spec(
            "tbf",
            &[("rate", s("1Mbit")), ("burst", i(3000)), ("limit", i(9000))],
        );
        assert!(tbf.splits_gso());
        assert!(spec("prio", &[("child", s("cake"))]).splits_gso());
        assert!(!spec("prio", &[("child", s("fq_codel"))]).splits_gso());
        assert!(!default_of("fq_codel").splits_gso());
    }

    #[test]
    fn fq_default_matches_tc_qdisc_show() {
        // `tc qdisc show` of a default fq on Linux ≥ 6.7 / iproute2 ≥ 6.7 (sch_fq defaults:
        // 2·MTU quantum, 10·MTU initial quantum, 550 kbit/s low-rate threshold, 40 ms refill
        // delay, 10 s horizon, 3 bands with priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 and weights
        // 589824 196608 65536). timer_slack is read and ignored: sojourn's timers are exact.
        let shown = "limit 10000p flow_limit 100p buckets 1024 orphan_mask 1023 quantum 3028b \
                     initial_quantum 15140b low_rate_threshold 550Kbit refill_delay 40ms \
                     timer_slack 10us horizon 10s horizon_drop bands 3 \
                     priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 weights 589824 196608 65536";
        assert_eq!(
            QdiscSpec::from_tc_args("fq", &words(shown), &BuildCtx::default()).unwrap(),
            default_of("fq")
        );
        // sfq's perturb as show prints it.
        assert_eq!(
            QdiscSpec::from_tc_args("sfq", &["perturb", "10sec"], &BuildCtx::default()).unwrap(),
            spec("sfq", &[("perturb", i(10))])
        );
    }

    #[test]
    fn tc_input_errors_name_the_keyword() {
        let e = QdiscSpec::from_tc_args("fq_codel", &["targte", "5ms"], &BuildCtx::default())
            .unwrap_err();
        assert!(e.msg.contains("did you mean \"target\""), "{e}");
        let e = QdiscSpec::from_tc_args("codel", &["target"], &BuildCtx::default()).unwrap_err();
        assert!(e.msg.contains("needs a value"), "{e}");
        // Values are validated by the same parser as experiment files.
        let e =
            QdiscSpec::from_tc_args("fq_codel", &["limit", "0"], &BuildCtx::default()).unwrap_err();
        assert!(e.msg.contains("out of range"), "{e}");
        let e = QdiscSpec::from_tc_args("lstf_codel", &[], &BuildCtx::default()).unwrap_err();
        assert!(e.msg.contains("not a Linux qdisc"), "{e}");
    }

    #[test]
    fn tc_units_follow_tc() {
        // tc(8): sizes b/k/m in powers of 1024; times s/ms/us (bare = us); rates in bit/s
        // with decimal prefixes, `bps` = bytes per second.
        assert_eq!(parse_tc_size("32Mb"), Some(33_554_432));
        assert_eq!(parse_tc_size("64k"), Some(65_536));
        assert_eq!(parse_tc_size("1514"), Some(1514));
        assert_eq!(parse_tc_time("5ms"), Some(Duration::from_ms(5)));
        assert_eq!(parse_tc_time("250"), Some(Duration::from_us(250)));
        assert_eq!(parse_tc_time("1.5s"), Some(Duration::from_ms(1500)));
        assert_eq!(parse_tc_rate("100mbit"), Some(100_000_000));
        assert_eq!(parse_tc_rate("1mbps"), Some(8_000_000));
        assert_eq!(parse_tc_rate("1kibit"), Some(1024));
        assert_eq!(tc_size(33_554_432), "32Mb");
        assert_eq!(tc_size(1_514_000), "1514000b");
        assert_eq!(tc_rate(550_000), "550Kbit");
        assert_eq!(tc_rate(12_345), "12345bit");
        assert_eq!(
            tc_time("x", "t", Duration::from_us(1500)).unwrap(),
            "1500us"
        );
        assert_eq!(tc_time("x", "t", Duration::from_secs(10)).unwrap(), "10s");
    }

    #[test]
    fn build_matches_the_registry_build() {
        // The spec path and the one-call registry path give the same discipline state.
        use crate::qdisc::Qdisc;
        let ctx = BuildCtx::default().child(7);
        let q = spec("prio", &[("child", s("fq_codel"))]);
        let a = q.build(&ctx);
        let b = crate::qdisc::build(
            &Value::Table(Table(vec![
                ("kind".into(), s("prio")),
                ("child".into(), s("fq_codel")),
            ])),
            "q",
            &ctx,
        )
        .unwrap();
        assert_eq!(a.len_packets(), b.len_packets());
        assert_eq!(q.children().len(), 3);
    }
}

/// tc's units and tree rules against tc and the kernel (session 7's mutation survivors).
#[cfg(test)]
#[path = "spec_tc_import.rs"]
mod tc_import;
