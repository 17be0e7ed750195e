//! The port harness (`sojourn.testing`, docs/adding-a-qdisc.md): a packet trace — the
//! operations one link's discipline saw in a simulated run, or made up — replayed into two
//! disciplines side by side, reporting the first decision where they differ.
//!
//! Recording wraps the link's discipline in a recorder, plugged in through the core's
//! external extension point like a Python discipline; it delegates every call, so the run
//! is the run it would have been (the engine only skips its FIFO cut-through shortcut,
//! which by construction decides nothing). Replaying builds both disciplines with the
//! context the recorded one had (its link's random stream included), so a discipline that
//! draws random numbers draws the same ones in the replay.

use crate::pydisc::{catch, ecn_of, PyResolver};
use crate::{conf_err, parse, to_value};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sojourn_core::packet::{Addr, FlowKey, Packet};
use sojourn_core::qdisc::external::{with_resolver, ExternalQdisc, ExternalSpec, Factory};
use sojourn_core::qdisc::{AnyQdisc, BuildCtx, Dequeue, Drops, Qdisc, QdiscSpec, Verdict};
use sojourn_core::time::Time;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

/// One operation a discipline saw. (About half are arrivals, each a packet: boxing them
/// would allocate per arrival to save the dequeues' padding.)
#[derive(Clone, Copy, Debug)]
#[allow(clippy::large_enum_variant)]
enum Op {
    /// A packet arrived (stamped `enqueued_at` by the link).
    Enqueue(Time, Packet),
    /// The link asked for the next packet.
    Dequeue(Time),
}

impl Op {
    fn time(&self) -> Time {
        match self {
            Op::Enqueue(t, _) | Op::Dequeue(t) => *t,
        }
    }
}

/// A packet trace: the operations in order, and the context the discipline was built with.
#[pyclass(module = "sojourn._engine")]
pub(crate) struct Trace {
    ops: Vec<Op>,
    ctx: BuildCtx,
    /// The link it was recorded at ("" for a made-up trace).
    #[pyo3(get)]
    link: String,
    /// Recording stopped at the operation cap; the trace is the run's first operations.
    #[pyo3(get)]
    truncated: bool,
}

#[pymethods]
impl Trace {
    fn __len__(&self) -> usize {
        self.ops.len()
    }

    /// `(enqueues, dequeues)`.
    fn counts(&self) -> (usize, usize) {
        let e = self
            .ops
            .iter()
            .filter(|o| matches!(o, Op::Enqueue(..)))
            .count();
        (e, self.ops.len() - e)
    }

    /// The operations as columns: `op` ("enqueue"/"dequeue"), `time_ns`, and for arrivals
    /// `uid`, `length`, `flow`, `ecn` (None for a dequeue).
    fn columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let mut op = Vec::with_capacity(self.ops.len());
        let mut t = Vec::with_capacity(self.ops.len());
        let mut uid = Vec::with_capacity(self.ops.len());
        let mut len = Vec::with_capacity(self.ops.len());
        let mut flow = Vec::with_capacity(self.ops.len());
        let mut ecn = Vec::with_capacity(self.ops.len());
        for o in &self.ops {
            t.push(o.time().0);
            match o {
                Op::Enqueue(_, p) => {
                    op.push("enqueue");
                    uid.push(Some(p.uid));
                    len.push(Some(p.len_bytes));
                    flow.push(Some(p.conversation()));
                    ecn.push(Some(p.ecn as u8));
                }
                Op::Dequeue(_) => {
                    op.push("dequeue");
                    uid.push(None);
                    len.push(None);
                    flow.push(None);
                    ecn.push(None);
                }
            }
        }
        d.set_item("op", op)?;
        d.set_item("time_ns", t)?;
        d.set_item("uid", uid)?;
        d.set_item("length", len)?;
        d.set_item("flow", flow)?;
        d.set_item("ecn", ecn)?;
        Ok(d)
    }

    /// A made-up trace from `[("enqueue", t_ns, {fields}), ("dequeue", t_ns), …]` in time
    /// order. Fields (all optional): `length` (1514), `flow` (0), `ecn` (0), `dscp`,
    /// `sport`, `dport`, `proto` (17), `src`/`dst` (IPv4 address as an int), `ct_bytes`.
    /// Packets get uids 1, 2, … in order; `seed` seeds the disciplines' random streams.
    #[staticmethod]
    #[pyo3(signature = (ops, seed = 1, link_rate_bps = 0))]
    fn synthetic(ops: &Bound<'_, PyList>, seed: u64, link_rate_bps: u64) -> PyResult<Trace> {
        let mut out = Vec::with_capacity(ops.len());
        let mut last = Time::ZERO;
        let mut uid = 0u64;
        for (i, item) in ops.iter().enumerate() {
            let bad = |m: &str| PyValueError::new_err(format!("ops[{i}]: {m}"));
            let kind: String = item.get_item(0)?.extract()?;
            let t = Time(item.get_item(1)?.extract::<u64>()?);
            if t < last {
                return Err(bad("times must not go back"));
            }
            last = t;
            match kind.as_str() {
                "enqueue" => {
                    let f = item.get_item(2).ok();
                    let get = |k: &str, d: u64| -> PyResult<u64> {
                        match &f {
                            Some(f) => match f.get_item(k) {
                                Ok(v) => v.extract::<u64>(),
                                Err(_) => Ok(d),
                            },
                            None => Ok(d),
                        }
                    };
                    uid += 1;
                    let ecn = ecn_of(get("ecn", 0)? as u8).ok_or_else(|| bad("ecn is 0..3"))?;
                    let key = FlowKey {
                        src_addr: Addr::v4(get("src", 0x0a00_0001)? as u32),
                        dst_addr: Addr::v4(get("dst", 0x0a00_0002)? as u32),
                        src_port: get("sport", 10_000)? as u16,
                        dst_port: get("dport", 5_001)? as u16,
                        proto: get("proto", 17)? as u8,
                    };
                    let len = get("length", 1514)? as u32;
                    let p = Packet {
                        uid,
                        tag: get("flow", 0)?,
                        key,
                        hash: key.hash(0x5a17),
                        len_bytes: len,
                        truesize_bytes: len,
                        dscp: get("dscp", 0)? as u8,
                        ecn,
                        created_at: t,
                        enqueued_at: t,
                        ct_bytes: get("ct_bytes", 0)?,
                        ..Packet::default()
                    };
                    out.push(Op::Enqueue(t, p));
                }
                "dequeue" => out.push(Op::Dequeue(t)),
                _ => return Err(bad("the operation is \"enqueue\" or \"dequeue\"")),
            }
        }
        Ok(Trace {
            ops: out,
            ctx: BuildCtx {
                link_rate_bps,
                seed,
                ..BuildCtx::default()
            },
            link: String::new(),
            truncated: false,
        })
    }
}

struct Tape {
    ops: Vec<Op>,
    cap: usize,
    truncated: bool,
    ctx: Option<BuildCtx>,
}

impl Tape {
    fn push(&mut self, op: Op) {
        if self.ops.len() < self.cap {
            self.ops.push(op);
        } else {
            self.truncated = true;
        }
    }
}

/// The recorded link's discipline with a tape beside it.
struct Recorder {
    inner: AnyQdisc,
    tape: Arc<Mutex<Tape>>,
}

impl Qdisc for Recorder {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        self.tape.lock().unwrap().push(Op::Enqueue(now, pkt));
        self.inner.enqueue(pkt, now, drops)
    }
    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        self.tape.lock().unwrap().push(Op::Dequeue(now));
        self.inner.dequeue(now, drops)
    }
    fn len_packets(&self) -> usize {
        self.inner.len_packets()
    }
    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
    fn ecn_marks(&self) -> u64 {
        self.inner.ecn_marks()
    }
    fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
        self.inner.observe(now, emit)
    }
}

struct RecorderFactory {
    inner: QdiscSpec,
    tape: Arc<Mutex<Tape>>,
}

impl Factory for RecorderFactory {
    fn label(&self) -> String {
        format!("recorder of {}", self.inner.kind())
    }
    fn build(&self, ctx: &BuildCtx) -> ExternalQdisc {
        self.tape.lock().unwrap().ctx = Some(ctx.clone());
        Box::new(Recorder {
            inner: self.inner.build(ctx),
            tape: self.tape.clone(),
        })
    }
    fn facts(&self) -> sojourn_core::qdisc::Facts {
        self.inner.facts()
    }
}

fn resolver(
    disciplines: Option<Py<PyAny>>,
) -> Option<Rc<dyn sojourn_core::qdisc::external::Resolver>> {
    disciplines
        .map(|obj| Rc::new(PyResolver { obj }) as Rc<dyn sojourn_core::qdisc::external::Resolver>)
}

/// Runs the experiment in the simulator and records the operations link `link`'s
/// discipline sees (at most `max_ops`).
#[pyfunction]
#[pyo3(signature = (cfg, base_dir, link, seed=None, disciplines=None, max_ops=5_000_000))]
pub(crate) fn record_trace(
    py: Python<'_>,
    cfg: &Bound<'_, PyDict>,
    base_dir: &str,
    link: &str,
    seed: Option<u64>,
    disciplines: Option<Py<PyAny>>,
    max_ops: usize,
) -> PyResult<Trace> {
    let mut exp = parse(cfg, base_dir, disciplines)?;
    let Some(i) = exp.link(link) else {
        let names: Vec<&str> = exp.links.iter().map(|l| l.name.as_str()).collect();
        return Err(PyValueError::new_err(format!(
            "no link {link:?}; the links are {}",
            names.join(", ")
        )));
    };
    let i = i as usize;
    let tape = Arc::new(Mutex::new(Tape {
        ops: Vec::new(),
        cap: max_ops,
        truncated: false,
        ctx: None,
    }));
    let lp = &mut exp.links[i];
    let inner = lp.qdisc.clone();
    lp.qdisc = QdiscSpec::External(ExternalSpec::new(
        lp.qdisc_path.clone(),
        Arc::new(RecorderFactory {
            inner,
            tape: tape.clone(),
        }),
    ));
    let seed = seed.unwrap_or(exp.seed);
    let out = catch(|| sojourn_sim::run(&exp, seed, &mut |_| py.check_signals().is_ok()))?;
    if out.is_none() {
        return Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(
            "recording aborted",
        ));
    }
    let mut t = tape.lock().unwrap();
    Ok(Trace {
        ops: std::mem::take(&mut t.ops),
        ctx: t.ctx.clone().unwrap_or_default(),
        link: link.to_string(),
        truncated: t.truncated,
    })
}

fn drops_text(d: &Drops) -> Vec<(u64, &'static str)> {
    d.as_slice()
        .iter()
        .map(|x| (x.pkt.uid, x.reason.name()))
        .collect()
}

fn describe(verdict: Option<Verdict>, deq: Option<Dequeue>, drops: &Drops) -> String {
    let mut s = match (verdict, deq) {
        (Some(Verdict::Dropped), _) => "dropped".to_string(),
        (Some(_), _) => "queued".to_string(),
        (None, Some(Dequeue::Packet(p))) => format!(
            "packet uid {}{}",
            p.uid,
            if p.ecn == sojourn_core::packet::Ecn::Ce {
                " (CE)"
            } else {
                ""
            }
        ),
        (None, Some(Dequeue::Empty)) => "nothing".to_string(),
        (None, Some(Dequeue::NotBefore(t))) => format!("nothing before {} ns", t.0),
        (None, None) => String::new(),
    };
    for (uid, r) in drops_text(drops) {
        s.push_str(&format!("; drops uid {uid} ({r})"));
    }
    s
}

/// Replays `trace` into disciplines `a` and `b` (each a qdisc spec as an experiment file
/// writes it: `"codel"`, `{kind = "python", module = …}`); returns `(operations replayed,
/// None)` when they agree on every decision, or `(i, difference)` at the first operation
/// where they do not: `op`, `time_ns`, `uid` (the arriving packet's, for an enqueue), and
/// what each decided (`a`, `b`: verdict or dequeued packet with its CE mark, and drops).
#[pyfunction]
#[pyo3(signature = (trace, a, b, base_dir, disciplines=None))]
pub(crate) fn replay<'py>(
    py: Python<'py>,
    trace: &Trace,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    base_dir: &str,
    disciplines: Option<Py<PyAny>>,
) -> PyResult<(usize, Option<Bound<'py, PyDict>>)> {
    let _ = base_dir;
    let spec = |v: &Bound<'py, PyAny>, name: &str| -> PyResult<QdiscSpec> {
        let value = to_value(v, name, 0).map_err(conf_err)?;
        let r = resolver(disciplines.as_ref().map(|d| d.clone_ref(py)));
        let parse = || QdiscSpec::parse(&value, name, &trace.ctx);
        match r {
            Some(r) => with_resolver(r, parse),
            None => parse(),
        }
        .map_err(conf_err)
    };
    let (sa, sb) = (spec(a, "a")?, spec(b, "b")?);
    let found = catch(|| {
        let mut qa = sa.build(&trace.ctx);
        let mut qb = sb.build(&trace.ctx);
        let (mut da, mut db) = (Drops::new(), Drops::new());
        for (i, op) in trace.ops.iter().enumerate() {
            da.clear();
            db.clear();
            let (same, ta, tb, uid) = match *op {
                Op::Enqueue(t, p) => {
                    let va = qa.enqueue(p, t, &mut da);
                    let vb = qb.enqueue(p, t, &mut db);
                    let same = va == vb && drops_text(&da) == drops_text(&db);
                    (
                        same,
                        describe(Some(va), None, &da),
                        describe(Some(vb), None, &db),
                        Some(p.uid),
                    )
                }
                Op::Dequeue(t) => {
                    let ra = qa.dequeue(t, &mut da);
                    let rb = qb.dequeue(t, &mut db);
                    let same_out = match (ra, rb) {
                        (Dequeue::Packet(x), Dequeue::Packet(y)) => {
                            x.uid == y.uid && x.ecn == y.ecn
                        }
                        (Dequeue::Empty, Dequeue::Empty) => true,
                        (Dequeue::NotBefore(x), Dequeue::NotBefore(y)) => x == y,
                        _ => false,
                    };
                    let same = same_out && drops_text(&da) == drops_text(&db);
                    (
                        same,
                        describe(None, Some(ra), &da),
                        describe(None, Some(rb), &db),
                        None,
                    )
                }
            };
            if !same {
                return Some((i, op.time(), matches!(op, Op::Enqueue(..)), uid, ta, tb));
            }
        }
        None
    })?;
    match found {
        None => Ok((trace.ops.len(), None)),
        Some((i, t, enq, uid, ta, tb)) => {
            let d = PyDict::new(py);
            d.set_item("index", i)?;
            d.set_item("op", if enq { "enqueue" } else { "dequeue" })?;
            d.set_item("time_ns", t.0)?;
            d.set_item("uid", uid)?;
            d.set_item("a", ta)?;
            d.set_item("b", tb)?;
            Ok((i, Some(d)))
        }
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Trace>()?;
    m.add_function(wrap_pyfunction!(record_trace, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    Ok(())
}
