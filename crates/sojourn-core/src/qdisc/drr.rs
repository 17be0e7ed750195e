//! DRR — deficit round robin over classes (Linux `sch_drr`, after Shreedhar and Varghese,
//! "Efficient fair queueing using deficit round robin", SIGCOMM 1995).
//!
//! Each class holds a child qdisc and a `quantum` of bytes (default: the device's
//! `psched_mtu`, 1514 on Ethernet). Classes with packets are kept in an active list; a
//! class joining the list gets `deficit = quantum`. Dequeue looks at the head class's
//! next packet: if it fits the deficit it is sent and the deficit reduced; if not, the
//! class gets another quantum and goes to the tail. So over a round each backlogged class
//! sends about its quantum: classes with quanta 1500 and 3000 share 1:2.
//!
//! Classification as `drr_classify`: `skb->priority` whose major is this qdisc's handle
//! and whose minor is a class selects it; otherwise the filters; a packet no rule places
//! is dropped (DRR has no default class). A head that does not fit is looked at by taking
//! it from the child and keeping it aside (the kernel's peek of a child without its own
//! peek). When the head class's child holds packets but sends none yet (a shaper), DRR
//! answers as the kernel does: nothing now, at the child's time.

use super::htb::{
    attach_to_classes, each_item, explicit_leaves, intern_leaf, parse_filter, read_classid,
    read_handle, tc_filter_lines, AddrFilters, HtbFilter, Leaves,
};
use super::vocab::{
    BuildCtx, Dequeue, Discipline, DropReason, Drops, Facts, NotLinux, Qdisc, TcClass, TcKey,
    Verdict,
};
use super::{AnyQdisc, Classful, QdiscSpec};
use crate::packet::Packet;
use crate::params::{ConfError, ConfResult, Params, Value};
use crate::time::Time;
use std::collections::{HashMap, VecDeque};

const NONE: u32 = u32::MAX;

/// One class of the typed spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DrrClassSpec {
    pub minor: u16,
    pub quantum_bytes: u32,
    /// Index into [`DrrSpec::leaves`]; `None`: pfifo of `tx_queue_len` packets.
    pub leaf: Option<u32>,
}

/// Typed spec of `drr`.
#[derive(Clone, Debug, PartialEq)]
pub struct DrrSpec {
    pub handle: u16,
    pub classes: Vec<DrrClassSpec>,
    pub leaves: Vec<QdiscSpec>,
    pub default_leaf: Box<QdiscSpec>,
    pub filters: Vec<HtbFilter>,
}

/// Per-class counters ([`Drr::class_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrrStats {
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub sojourn_sum_ns: u64,
}

struct Class {
    deficit: u32,
    quantum: u32,
    leaf: u32,
    leaf_spec: u32,
    minor: u16,
    active: bool,
    /// The child's head, taken out to look at its length.
    stash: Option<Packet>,
    stats: DrrStats,
}

pub struct Drr {
    handle: u16,
    classes: Vec<Class>,
    by_minor: HashMap<u16, u32>,
    active: VecDeque<u32>,
    leaves: Leaves,
    filters: AddrFilters,
    /// Heads held aside: how many, and their bytes.
    stashed: (usize, u64),
    unclassified: u64,
}

impl Drr {
    pub fn new(spec: &DrrSpec, ctx: &BuildCtx) -> Drr {
        let by_minor: HashMap<u16, u32> = spec
            .classes
            .iter()
            .enumerate()
            .map(|(i, c)| (c.minor, i as u32))
            .collect();
        let class = |c: &DrrClassSpec| Class {
            deficit: 0,
            quantum: c.quantum_bytes,
            leaf: NONE,
            leaf_spec: c.leaf.unwrap_or(NONE),
            minor: c.minor,
            active: false,
            stash: None,
            stats: DrrStats::default(),
        };
        Drr {
            handle: spec.handle,
            classes: spec.classes.iter().map(class).collect(),
            filters: AddrFilters::new(&spec.filters, |m| by_minor[&m]),
            by_minor,
            active: VecDeque::new(),
            leaves: Leaves::new(&spec.leaves, &spec.default_leaf, ctx),
            stashed: (0, 0),
            unclassified: 0,
        }
    }

    /// `(classid minor, counters)` in the spec's class order.
    pub fn class_stats(&self) -> impl Iterator<Item = (u16, &DrrStats)> + '_ {
        self.classes.iter().map(|c| (c.minor, &c.stats))
    }
    /// Packets dropped because no rule classified them.
    pub fn unclassified(&self) -> u64 {
        self.unclassified
    }
    /// Queued packets of class `H:minor`.
    pub fn class_len_packets(&self, minor: u16) -> usize {
        self.by_minor.get(&minor).map_or(0, |&i| self.class_len(i))
    }

    /// The class's child's packets and its held-aside head.
    fn class_len(&self, cl: u32) -> usize {
        let c = &self.classes[cl as usize];
        self.leaves.queued(c.leaf) + c.stash.is_some() as usize
    }

    /// `drr_classify`.
    #[inline]
    fn classify(&self, pkt: &Packet) -> Option<u32> {
        if pkt.priority >> 16 == self.handle as u32 {
            if let Some(&i) = self.by_minor.get(&((pkt.priority & 0xFFFF) as u16)) {
                return Some(i);
            }
        }
        self.filters.classify(pkt)
    }

    /// Runs `op` on class `cl`'s child, counting its drops against the class.
    fn on_leaf<R>(
        &mut self,
        cl: u32,
        drops: &mut Drops,
        op: impl FnOnce(&mut AnyQdisc, &mut Drops) -> R,
    ) -> R {
        let (r, dropped) = self.leaves.with(self.classes[cl as usize].leaf, drops, op);
        self.classes[cl as usize].stats.drops += dropped;
        r
    }

    /// The head class leaves the active list.
    fn retire_head(&mut self) {
        if let Some(cl) = self.active.pop_front() {
            self.classes[cl as usize].active = false;
        }
    }
}

impl Qdisc for Drr {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        let Some(cl) = self.classify(&pkt) else {
            // No class: dropped, as sch_drr does.
            self.unclassified += 1;
            drops.push(pkt, DropReason::Overlimit);
            return Verdict::Dropped;
        };
        let c = &mut self.classes[cl as usize];
        self.leaves.ensure(&mut c.leaf, c.leaf_spec, cl);
        let v = self.on_leaf(cl, drops, |q, d| q.enqueue(pkt, now, d));
        let c = &mut self.classes[cl as usize];
        if !c.active && self.leaves.queued(c.leaf) > 0 {
            // A class joins the tail with a fresh quantum.
            c.active = true;
            c.deficit = c.quantum;
            self.active.push_back(cl);
        }
        v
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        while let Some(&cl) = self.active.front() {
            // The head's next packet, kept aside until it fits the deficit.
            if self.classes[cl as usize].stash.is_none() {
                match self.on_leaf(cl, drops, |q, d| q.dequeue(now, d)) {
                    Dequeue::Packet(p) => {
                        self.stashed.0 += 1;
                        self.stashed.1 += p.len_bytes as u64;
                        self.classes[cl as usize].stash = Some(p);
                    }
                    Dequeue::NotBefore(t) => return Dequeue::NotBefore(t),
                    Dequeue::Empty => {
                        // Emptied by its own AQM: the kernel's qlen_notify takes the
                        // class off the active list.
                        self.retire_head();
                        continue;
                    }
                }
            }
            let c = &mut self.classes[cl as usize];
            let len = c.stash.as_ref().map_or(0, |p| p.len_bytes);
            if len > c.deficit {
                c.deficit = c.deficit.saturating_add(c.quantum);
                self.active.rotate_left(1);
                continue;
            }
            c.deficit -= len;
            let p = c.stash.take().expect("stashed head");
            c.stats.bytes += len as u64;
            c.stats.packets += 1;
            c.stats.sojourn_sum_ns += (now - p.enqueued_at).as_ns();
            self.stashed.0 -= 1;
            self.stashed.1 -= len as u64;
            if self.class_len(cl) == 0 {
                self.retire_head();
            }
            return Dequeue::Packet(p);
        }
        Dequeue::Empty
    }

    /// The children's packets and the heads held aside.
    #[inline]
    fn len_packets(&self) -> usize {
        self.leaves.totals().0 + self.stashed.0
    }
    #[inline]
    fn len_bytes(&self) -> u64 {
        self.leaves.totals().1 + self.stashed.1
    }
    fn ecn_marks(&self) -> u64 {
        self.leaves.ecn_marks()
    }
    /// `unclassified`, and per class (at most 64) `H:M.bytes/.packets/.drops`, the queue
    /// and the child's series.
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        emit("unclassified", self.unclassified as f64);
        if self.classes.len() > 64 {
            return;
        }
        for c in &self.classes {
            let name = format!("{:x}:{:x}", self.handle, c.minor);
            for (k, v) in [
                ("bytes", c.stats.bytes),
                ("packets", c.stats.packets),
                ("drops", c.stats.drops),
            ] {
                emit(&format!("{name}.{k}"), v as f64);
            }
            self.leaves.observe(c.leaf, now, &name, emit);
        }
    }
}

impl DrrSpec {
    /// Adds a leaf spec (or finds an equal one) and returns its index.
    pub fn leaf_index(&mut self, spec: QdiscSpec) -> u32 {
        intern_leaf(&mut self.leaves, spec)
    }

    fn parse_class(&mut self, v: &Value, path: &str, ctx: &BuildCtx) -> ConfResult<()> {
        let Value::Table(t) = v else {
            return Err(ConfError::new(
                path,
                format!("expected a class table, got {}", v.type_name()),
            ));
        };
        let mut p = Params::new(path, t);
        let h = self.handle;
        let minor = match read_classid(&mut p, "classid", h)? {
            Some(0) => return Err(p.err("classid", "minor 0 is the qdisc itself, not a class")),
            Some(m) => m,
            None => return Err(p.err("classid", format!("required, e.g. \"{h:x}:1\""))),
        };
        if self.classes.iter().any(|c| c.minor == minor) {
            return Err(p.err("classid", format!("duplicate classid {h:x}:{minor:x}")));
        }
        let quantum = match p.bytes_opt("quantum")? {
            // The kernel: "Specified DRR quantum cannot be zero".
            Some(0) => return Err(p.err("quantum", "cannot be zero (as the kernel says)")),
            Some(q) if q > u32::MAX as u64 => return Err(p.err("quantum", "must fit in 32 bits")),
            Some(q) => q as u32,
            None => ctx.mtu_bytes,
        };
        let leaf = match p.raw("qdisc") {
            None => None,
            Some(lv) => {
                let spec = QdiscSpec::parse(lv, &p.key_path("qdisc"), ctx)?;
                Some(self.leaf_index(spec))
            }
        };
        p.finish()?;
        self.classes.push(DrrClassSpec {
            minor,
            quantum_bytes: quantum,
            leaf,
        });
        Ok(())
    }
}

impl Discipline for DrrSpec {
    const KIND: &'static str = "drr";
    const SUMMARY: &'static str =
        "Deficit round robin over classes with a quantum each (Linux sch_drr)";
    type Qdisc = Box<Drr>;

    /// `drr [handle H:] classes = [{ classid, quantum, qdisc }] [filters = [...]]`.
    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let handle = read_handle(p)?;
        let default_leaf = QdiscSpec::parse(&Value::Str("pfifo".into()), "drr.leaf", ctx)?;
        let mut spec = DrrSpec {
            handle,
            classes: Vec::new(),
            leaves: Vec::new(),
            default_leaf: Box::new(default_leaf),
            filters: Vec::new(),
        };
        each_item(p, "classes", "class", |v, path| {
            spec.parse_class(v, &path, ctx)
        })?;
        each_item(p, "filters", "filter", |v, path| {
            let f = parse_filter(v, &path, handle)?;
            if !spec.classes.iter().any(|c| c.minor == f.minor) {
                return Err(ConfError::new(
                    format!("{path}.classid"),
                    format!("{handle:x}:{:x} is not a class of this drr", f.minor),
                ));
            }
            spec.filters.push(f);
            Ok(())
        })?;
        Ok(spec)
    }

    fn build(&self, ctx: &BuildCtx) -> Box<Drr> {
        Box::new(Drr::new(self, ctx))
    }

    const TC_KEYS: Option<&'static [TcKey]> = Some(&[]);

    /// `drr` takes no qdisc arguments; classes are `tc class` lines ([`DrrSpec::class_args`]).
    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Ok(Vec::new())
    }

    /// The handle is semantic: classids and `skb->priority` name it.
    const TC_HANDLE_KEY: Option<&'static str> = Some("handle");

    fn facts(&self) -> Facts {
        Facts::with_tc_handle(self.handle)
    }
}

impl DrrSpec {
    /// `quantum N` of `tc class add … classid H:M drr quantum N`.
    pub fn class_args(&self, c: &DrrClassSpec) -> Vec<String> {
        vec!["quantum".into(), c.quantum_bytes.to_string()]
    }
}

impl Classful for DrrSpec {
    fn children(&self) -> Vec<&QdiscSpec> {
        self.leaves.iter().collect()
    }
    fn tc_children(&self) -> Vec<&QdiscSpec> {
        explicit_leaves(&self.leaves, self.classes.iter().map(|c| (c.minor, c.leaf))).0
    }
    fn tc_child_minors(&self) -> Vec<u16> {
        explicit_leaves(&self.leaves, self.classes.iter().map(|c| (c.minor, c.leaf))).1
    }
    /// `parent H: classid H:M drr quantum N`.
    fn tc_classes(&self) -> Result<Vec<TcClass>, NotLinux> {
        Ok(self
            .classes
            .iter()
            .map(|c| TcClass {
                parent: self.handle,
                parent_minor: 0,
                classid: (self.handle, c.minor),
                kind: "drr",
                args: self.class_args(c),
            })
            .collect())
    }
    fn tc_filters(&self) -> Result<Vec<String>, NotLinux> {
        tc_filter_lines("drr", self.handle, &self.filters)
    }
    fn attach(&mut self, children: Vec<(u16, QdiscSpec)>) -> ConfResult<()> {
        let minors: Vec<u16> = self.classes.iter().map(|c| c.minor).collect();
        for (i, l) in attach_to_classes("drr", self.handle, &minors, &mut self.leaves, children)? {
            self.classes[i].leaf = Some(l);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Table;
    use crate::qdisc::testkit::{check_conservation, pkt};

    fn s(x: &str) -> Value {
        Value::Str(x.into())
    }
    fn table(kv: &[(&str, Value)]) -> Value {
        Value::Table(Table(
            kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
        ))
    }
    fn spec_of(kv: &[(&str, Value)]) -> ConfResult<DrrSpec> {
        let mut all = vec![("kind", s("drr"))];
        all.extend(kv.iter().cloned());
        match QdiscSpec::parse(&table(&all), "q", &BuildCtx::default())? {
            QdiscSpec::Drr(d) => Ok(d),
            other => panic!("{other:?}"),
        }
    }
    fn two_classes(q1: i64, q2: i64) -> Drr {
        let spec = spec_of(&[(
            "classes",
            Value::Array(vec![
                table(&[("classid", s("1:1")), ("quantum", Value::Int(q1))]),
                table(&[("classid", s("1:2")), ("quantum", Value::Int(q2))]),
            ]),
        )])
        .unwrap();
        *spec.build(&BuildCtx::default())
    }
    fn to(uid: u64, minor: u32, len: u32) -> Packet {
        let mut p = pkt(uid, minor, len);
        p.priority = 0x1_0000 | minor;
        p
    }

    #[test]
    fn quanta_1500_and_3000_share_bytes_1_to_2() {
        let mut q = two_classes(1500, 3000);
        let mut d = Drops::new();
        let mut uid = 0;
        for _ in 0..300 {
            for minor in [1, 2] {
                q.enqueue(to(uid, minor, 1500), Time::ZERO, &mut d);
                uid += 1;
            }
        }
        let mut bytes = [0u64; 3];
        for _ in 0..300 {
            let p = q.dequeue(Time::ZERO, &mut d).packet().unwrap();
            bytes[(p.priority & 0xFFFF) as usize] += p.len_bytes as u64;
        }
        // 300 packets while both are backlogged: 100 of class 1, 200 of class 2.
        assert_eq!(bytes[1], 150_000);
        assert_eq!(bytes[2], 300_000);
    }

    #[test]
    fn a_packet_larger_than_the_deficit_waits_for_more_rounds() {
        // Class 1 (quantum 500) holds one 1400 B packet; class 2 (quantum 1500) 100 B
        // ones. Class 1 needs three rounds (500, 1000, 1500 ≥ 1400): class 2 sends its
        // quantum, 15 packets, in each of the two rounds in between.
        let mut q = two_classes(500, 1500);
        let mut d = Drops::new();
        q.enqueue(to(0, 1, 1400), Time::ZERO, &mut d);
        for i in 1..=40 {
            q.enqueue(to(i, 2, 100), Time::ZERO, &mut d);
        }
        let order: Vec<u64> = (0..41)
            .map(|_| q.dequeue(Time::ZERO, &mut d).packet().unwrap().uid)
            .collect();
        let pos = order.iter().position(|&u| u == 0).unwrap();
        assert_eq!(pos, 30, "{order:?}");
    }

    #[test]
    fn default_quantum_is_psched_mtu_and_leaf_pfifo() {
        let spec = spec_of(&[(
            "classes",
            Value::Array(vec![table(&[("classid", s("1:1"))])]),
        )])
        .unwrap();
        assert_eq!(spec.classes[0].quantum_bytes, 1514);
        let mut q = *spec.build(&BuildCtx::default());
        let mut d = Drops::new();
        for i in 0..1003 {
            q.enqueue(to(i, 1, 100), Time::ZERO, &mut d);
        }
        assert_eq!(q.len_packets(), 1000);
        assert_eq!(d.len(), 3);
    }

    #[test]
    fn unclassified_packets_are_dropped() {
        let mut q = two_classes(1500, 1500);
        let mut d = Drops::new();
        assert_eq!(
            q.enqueue(pkt(1, 1, 100), Time::ZERO, &mut d),
            Verdict::Dropped
        );
        let mut p = pkt(2, 1, 100);
        p.priority = 0x1_0003;
        assert_eq!(q.enqueue(p, Time::ZERO, &mut d), Verdict::Dropped);
        assert_eq!(q.unclassified(), 2);
        assert_eq!(q.len_packets(), 0);
    }

    #[test]
    fn bad_input() {
        let e = spec_of(&[(
            "classes",
            Value::Array(vec![table(&[
                ("classid", s("1:1")),
                ("quantum", Value::Int(0)),
            ])]),
        )])
        .unwrap_err();
        assert_eq!(e.path, "q.classes[0].quantum");
        let e = spec_of(&[(
            "classes",
            Value::Array(vec![
                table(&[("classid", s("1:1"))]),
                table(&[("classid", s("1:1"))]),
            ]),
        )])
        .unwrap_err();
        assert!(e.msg.contains("duplicate classid 1:1"), "{e}");
        let e = spec_of(&[(
            "classes",
            Value::Array(vec![table(&[("classid", s("2:1"))])]),
        )])
        .unwrap_err();
        assert_eq!(e.path, "q.classes[0].classid");
    }

    #[test]
    fn tc_lines_round_trip() {
        let spec = spec_of(&[(
            "classes",
            Value::Array(vec![
                table(&[("classid", s("1:1")), ("quantum", Value::Int(1500))]),
                table(&[
                    ("classid", s("1:2")),
                    ("quantum", Value::Int(3000)),
                    ("qdisc", s("fq_codel")),
                ]),
            ]),
        )])
        .unwrap();
        let q = QdiscSpec::Drr(spec);
        let lines: Vec<String> = q
            .tc_lines()
            .unwrap()
            .into_iter()
            .map(|(o, a)| format!("{o} {a}"))
            .collect();
        assert_eq!(lines[0], "qdisc root handle 1: drr");
        assert_eq!(lines[1], "class parent 1: classid 1:1 drr quantum 1500");
        assert_eq!(lines[2], "class parent 1: classid 1:2 drr quantum 3000");
        assert!(
            lines[3].starts_with("qdisc parent 1:2 handle 2: fq_codel"),
            "{lines:?}"
        );
        let refs: Vec<&str> = lines.iter().map(|l| l.as_str()).collect();
        assert_eq!(
            QdiscSpec::from_tc_lines(&refs, &BuildCtx::default()).unwrap(),
            q
        );
    }

    #[test]
    fn conservation_property() {
        for seed in 0..8 {
            let spec = spec_of(&[
                (
                    "classes",
                    Value::Array(vec![
                        table(&[("classid", s("1:1")), ("quantum", Value::Int(700))]),
                        table(&[("classid", s("1:2")), ("qdisc", s("fq_codel"))]),
                        table(&[
                            ("classid", s("1:3")),
                            (
                                "qdisc",
                                table(&[("kind", s("pfifo")), ("limit", Value::Int(5))]),
                            ),
                        ]),
                    ]),
                ),
                (
                    "filters",
                    Value::Array(vec![
                        table(&[("src", Value::Int(3)), ("classid", s("1:1"))]),
                        table(&[("dst", Value::Int(2)), ("classid", s("1:2"))]),
                        table(&[("src", Value::Int(1)), ("classid", s("1:3"))]),
                    ]),
                ),
            ])
            .unwrap();
            let mut q = *spec.build(&BuildCtx::default());
            check_conservation(&mut q, seed, 4_000, |q| q.class_len_packets(3) <= 6);
        }
    }
}
