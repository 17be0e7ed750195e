//! Disciplines written in Python (docs/python-disciplines.md): the core's external
//! extension point (`sojourn_core::qdisc::external`) filled with a Python class.
//!
//! - [`PyResolver`] is in scope while the front's experiment is parsed: it hands what the
//!   file says (`module`, `class`, the class's own parameters) to the front's
//!   `sojourn.disciplines.Resolver`, which imports the class and checks the contract, and
//!   answers a [`PyFactory`].
//! - [`PyFactory::build`] constructs one instance per link with an [`PyRng`] seeded from
//!   the link's stream (`BuildCtx::seed`, `Rng::stream(seed, "qdisc", link)` in the
//!   simulator), so the same file and seed give the same decisions.
//! - [`PyQdisc`] is the `Qdisc` the engine calls: each arriving packet becomes a
//!   read-only [`PyPacket`]; a ledger (slot and serial per packet held) makes sure a
//!   packet comes back at most once, so conservation holds whatever the class does, and
//!   gives the engine the queue's length and bytes without calling Python.
//! - A Python exception, or a broken promise of the contract, in the middle of a run
//!   unwinds out of the engine with a [`Failure`] payload (no check on the engine's hot
//!   path), caught by [`catch`] where sojourn-py started the engine and raised as
//!   `DisciplineError` with the class's own exception as its cause (its traceback is the
//!   user's code).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyTuple};
use sojourn_core::packet::{Ecn, Packet};
use sojourn_core::params::{ConfError, ConfResult, Params, Value};
use sojourn_core::qdisc::external::{ExternalQdisc, Factory, Resolver};
use sojourn_core::qdisc::{BuildCtx, Dequeue, DropReason, Drops, Facts, Qdisc, Verdict};
use sojourn_core::rng::Rng;
use sojourn_core::time::Time;
use std::sync::Arc;

pyo3::create_exception!(
    _engine,
    DisciplineError,
    PyRuntimeError,
    "A Python discipline raised, or broke its contract, during a run; nothing was written. \
     Its own exception, with its traceback, is the __cause__."
);

/// Why a run stopped inside a Python discipline: the payload the engine unwinds with.
pub(crate) struct Failure {
    /// One line: the spec's key path, the class, the method, what happened and when.
    msg: String,
    /// The class's own exception, when it raised.
    cause: Option<PyErr>,
}

impl Failure {
    /// Unwinds out of the engine (no panic message: `resume_unwind` skips the hook).
    fn raise(self) -> ! {
        std::panic::resume_unwind(Box::new(self))
    }
}

/// Runs `f` (an engine), turning a [`Failure`] unwinding out of it into a
/// `DisciplineError`; any other panic goes on unwinding as it was.
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(v) => Ok(v),
        Err(payload) => match payload.downcast::<Failure>() {
            Ok(failure) => Python::attach(|py| {
                let err = DisciplineError::new_err(failure.msg);
                err.set_cause(py, failure.cause);
                Err(err)
            }),
            Err(other) => std::panic::resume_unwind(other),
        },
    }
}

/// The packets a discipline holds: a slot and a serial number each, so that a packet
/// handed back twice, or one the class made up, is caught; and the drops and marks made
/// through a packet's own methods during a call.
#[pyclass(module = "sojourn._engine")]
pub(crate) struct Ledger {
    /// Per slot, the serial of the packet in it (0: free).
    serial_of_slot: Vec<u64>,
    free: Vec<u32>,
    next_serial: u64,
    count: usize,
    bytes: u64,
    marks: u64,
    drops: Vec<(Packet, DropReason)>,
    /// Inside an `enqueue` or `dequeue` call: a packet may be dropped or marked only then.
    active: bool,
}

impl Ledger {
    fn new() -> Ledger {
        Ledger {
            serial_of_slot: Vec::new(),
            free: Vec::new(),
            next_serial: 1,
            count: 0,
            bytes: 0,
            marks: 0,
            drops: Vec::new(),
            active: false,
        }
    }

    fn admit(&mut self, pkt: &Packet) -> (u32, u64) {
        let serial = self.next_serial;
        self.next_serial += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.serial_of_slot[s as usize] = serial;
                s
            }
            None => {
                self.serial_of_slot.push(serial);
                (self.serial_of_slot.len() - 1) as u32
            }
        };
        self.count += 1;
        self.bytes += pkt.len_bytes as u64;
        (slot, serial)
    }

    fn holds(&self, slot: u32, serial: u64) -> bool {
        self.serial_of_slot.get(slot as usize) == Some(&serial)
    }

    fn release(&mut self, slot: u32, pkt: &Packet) {
        self.serial_of_slot[slot as usize] = 0;
        self.free.push(slot);
        self.count -= 1;
        self.bytes -= pkt.len_bytes as u64;
    }
}

/// A packet as a Python discipline sees it: read-only fields, `mark_ce()` and `drop()`.
/// The fields are copied out of the packet when it arrives (plain integers, cheaper to read
/// from Python than through a method); the packet itself stays as the engine made it.
#[pyclass(module = "sojourn._engine", name = "Packet")]
pub(crate) struct PyPacket {
    pkt: Packet,
    slot: u32,
    serial: u64,
    ledger: Py<Ledger>,
    /// Unique within a run.
    #[pyo3(get)]
    uid: u64,
    /// Bytes as a Linux qdisc counts them (`qdisc_pkt_len`: the frame with its 14-byte
    /// Ethernet header).
    #[pyo3(get)]
    length: u32,
    /// The conversation (connection or stream) the engine numbers it with.
    #[pyo3(get)]
    flow: u32,
    /// The symmetric flow hash of the 5-tuple (both directions alike).
    #[pyo3(get)]
    flow_hash: u32,
    #[pyo3(get)]
    sport: u16,
    #[pyo3(get)]
    dport: u16,
    /// IP protocol number (6 TCP, 17 UDP).
    #[pyo3(get)]
    proto: u8,
    #[pyo3(get)]
    dscp: u8,
    /// When the link handed it to the discipline, ns of the run's clock.
    #[pyo3(get)]
    enqueued_at_ns: u64,
    /// When its source created it, ns.
    #[pyo3(get)]
    created_at_ns: u64,
    /// Bytes its connection has carried so far, both directions, this packet included
    /// (nftables `ct bytes`), where conntrack runs on the node; 0 otherwise.
    #[pyo3(get)]
    ct_bytes: u64,
    /// `skb->priority` as classifiers set it (`major << 16 | minor`).
    #[pyo3(get)]
    priority: u32,
}

impl PyPacket {
    fn new(pkt: Packet, slot: u32, serial: u64, ledger: Py<Ledger>) -> PyPacket {
        PyPacket {
            uid: pkt.uid,
            length: pkt.len_bytes,
            flow: pkt.conversation(),
            flow_hash: pkt.hash,
            sport: pkt.key.src_port,
            dport: pkt.key.dst_port,
            proto: pkt.key.proto,
            dscp: pkt.dscp,
            enqueued_at_ns: pkt.enqueued_at.0,
            created_at_ns: pkt.created_at.0,
            ct_bytes: pkt.ct_bytes,
            priority: pkt.priority,
            pkt,
            slot,
            serial,
            ledger,
        }
    }
}

/// The drop reasons a discipline may give (`link_loss` is the link's, not a discipline's).
fn reason_named(name: &str) -> Option<DropReason> {
    DropReason::ALL
        .into_iter()
        .find(|r| r.name() == name && *r != DropReason::LinkLoss)
}

#[pymethods]
impl PyPacket {
    /// Source address, as text (IPv4 or IPv6).
    #[getter]
    fn src(&self) -> String {
        self.pkt.key.src_addr.to_string()
    }
    /// Destination address, as text.
    #[getter]
    fn dst(&self) -> String {
        self.pkt.key.dst_addr.to_string()
    }
    /// `(src, dst, sport, dport, proto)`.
    #[getter]
    fn five_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        (self.src(), self.dst(), self.sport, self.dport, self.proto).into_pyobject(py)
    }
    /// The ECN codepoint now: 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE (RFC 3168).
    #[getter]
    fn ecn(&self) -> u8 {
        self.pkt.ecn as u8
    }

    /// Sets CE (`INET_ECN_set_ce`): True for an ECN-capable packet (counted as a mark),
    /// False for Not-ECT, which the discipline must drop instead.
    fn mark_ce(&mut self, py: Python<'_>) -> PyResult<bool> {
        let mut l = self.ledger.borrow_mut(py);
        self.check_held(&l, "mark_ce")?;
        let marked = self.pkt.set_ce();
        l.marks += marked as u64;
        Ok(marked)
    }

    /// Drops the packet (the engine counts it under `reason`, one of summary.json's drop
    /// reasons: "aqm", "overlimit", "early", "head_drop", …). The discipline forgets it.
    #[pyo3(signature = (reason = "aqm"))]
    fn drop(&self, py: Python<'_>, reason: &str) -> PyResult<()> {
        let Some(r) = reason_named(reason) else {
            let names: Vec<&str> = DropReason::ALL
                .iter()
                .filter(|r| **r != DropReason::LinkLoss)
                .map(|r| r.name())
                .collect();
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown drop reason {reason:?}; one of {}",
                names.join(", ")
            )));
        };
        let mut l = self.ledger.borrow_mut(py);
        self.check_held(&l, "drop")?;
        l.release(self.slot, &self.pkt);
        l.drops.push((self.pkt, r));
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "Packet(uid={}, length={}, flow={}, ecn={}, enqueued_at_ns={})",
            self.pkt.uid,
            self.pkt.len_bytes,
            self.pkt.conversation(),
            self.pkt.ecn as u8,
            self.pkt.enqueued_at.0
        )
    }
}

impl PyPacket {
    fn check_held(&self, l: &Ledger, what: &str) -> PyResult<()> {
        if !l.active {
            return Err(PyRuntimeError::new_err(format!(
                "packet.{what}() outside enqueue or dequeue"
            )));
        }
        if !l.holds(self.slot, self.serial) {
            return Err(PyRuntimeError::new_err(format!(
                "packet.{what}(): the discipline no longer holds this packet (dequeued or dropped)"
            )));
        }
        Ok(())
    }
}

/// The random generator handed to a discipline's constructor: sojourn's own (xoshiro256++,
/// `sojourn_core::rng::Rng`), seeded from the link's stream, so a Rust port drawing from
/// `ctx.rng()` in the same order draws the same numbers.
#[pyclass(module = "sojourn._engine", name = "Rng")]
pub(crate) struct PyRng {
    rng: Rng,
}

#[pymethods]
impl PyRng {
    /// A generator from a seed (the engine seeds the one it hands to a constructor).
    #[new]
    fn new(seed: u64) -> PyRng {
        PyRng {
            rng: Rng::from_seed(seed),
        }
    }
    /// Uniform in [0, 1) (`Rng::f64`).
    fn random(&mut self) -> f64 {
        self.rng.f64()
    }
    /// Uniform integer in [0, n) (`Rng::below`), n > 0.
    fn below(&mut self, n: u64) -> PyResult<u64> {
        if n == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "below(n) needs n > 0",
            ));
        }
        Ok(self.rng.below(n))
    }
    /// Uniform in [lo, hi) (`Rng::uniform`).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        self.rng.uniform(lo, hi)
    }
    /// Exponential with this mean (`Rng::exp`).
    fn exp(&mut self, mean: f64) -> f64 {
        self.rng.exp(mean)
    }
    /// True with probability p (`Rng::chance`).
    fn chance(&mut self, p: f64) -> bool {
        self.rng.chance(p)
    }
    /// The next 64 random bits (`Rng::next_u64`).
    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
}

/// A thread that calls Python without a Python thread state of its own (the emulator's
/// forwarder) would have one made and destroyed at every call (`PyGILState_Ensure` and
/// `PyGILState_Release` at count 0), several µs per packet. The first call on such a
/// thread makes one that lives as long as the thread, so each call only takes and gives
/// back the GIL; the thread's exit lets it go.
struct ThreadStatePin;

impl Drop for ThreadStatePin {
    fn drop(&mut self) {
        // SAFETY: this thread's state was made by `pin_thread_state` (count 1, GIL not
        // held): take the GIL (count 2), drop one count keeping the GIL, then the last,
        // which deletes the state and releases the GIL.
        unsafe {
            let _ = pyo3::ffi::PyGILState_Ensure();
            pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_LOCKED);
            pyo3::ffi::PyGILState_Release(pyo3::ffi::PyGILState_STATE::PyGILState_UNLOCKED);
        }
    }
}

thread_local! {
    /// `None`: not looked at yet; `Some(None)`: the thread has a state of its own (the
    /// interpreter's threads: the simulator's caller); `Some(Some(_))`: pinned here.
    static PINNED: std::cell::RefCell<Option<Option<ThreadStatePin>>> =
        const { std::cell::RefCell::new(None) };
}

fn pin_thread_state() {
    PINNED.with(|p| {
        if p.borrow().is_some() {
            return;
        }
        // SAFETY: plain CPython calls; `PyGILState_GetThisThreadState` needs no GIL, and a
        // thread without a state holds no GIL, so Ensure (which takes it) and SaveThread
        // (which releases it, keeping the state) leave the thread as it was, with a state.
        let pin = unsafe {
            if pyo3::ffi::PyGILState_GetThisThreadState().is_null() {
                let _ = pyo3::ffi::PyGILState_Ensure();
                pyo3::ffi::PyEval_SaveThread();
                Some(ThreadStatePin)
            } else {
                None
            }
        };
        *p.borrow_mut() = Some(pin);
    })
}

/// Where a discipline sits, for errors.
struct Where {
    path: String,
    label: String,
}

/// A Python discipline instance, as the engine calls it.
pub(crate) struct PyQdisc {
    inst: Py<PyAny>,
    enqueue: Py<PyAny>,
    dequeue: Py<PyAny>,
    ledger: Py<Ledger>,
    at: Arc<Where>,
    /// The class has the optional `bytes` (checked with `__len__`).
    has_bytes: bool,
    // The ledger's counts after the last call: they change only inside a call, so the
    // engine reads them without the GIL.
    count: usize,
    bytes: u64,
    marks: u64,
}

impl PyQdisc {
    fn fail(&self, method: &str, now: Time, problem: String, cause: Option<PyErr>) -> Failure {
        Failure {
            msg: format!(
                "{}: {}.{method} {problem} at t={:.9} s; the run stopped and nothing was written",
                self.at.path,
                self.at.label,
                now.as_secs_f64()
            ),
            cause,
        }
    }

    fn raised(&self, py: Python<'_>, method: &str, now: Time, e: PyErr) -> Failure {
        let what = match e.value(py).repr() {
            Ok(r) => r.to_string(),
            Err(_) => "an exception".into(),
        };
        self.fail(method, now, format!("raised {what}"), Some(e))
    }

    /// Calls the class's method `name` (bound as `f`) with `args`; if it raised, the
    /// ledger's call ends there and the exception becomes the run's [`Failure`].
    fn call<'py, A: pyo3::call::PyCallArgs<'py>>(
        &self,
        py: Python<'py>,
        f: &Py<PyAny>,
        name: &str,
        args: A,
        now: Time,
    ) -> Result<Py<PyAny>, Failure> {
        f.call1(py, args).map_err(|e| {
            self.ledger.borrow_mut(py).active = false;
            self.raised(py, name, now, e)
        })
    }

    /// Ends a call: moves the drops made through packets into the engine's sink and
    /// takes the ledger's counts.
    fn settle(&mut self, l: &mut Ledger, drops: &mut Drops) {
        l.active = false;
        for (p, r) in l.drops.drain(..) {
            drops.push(p, r);
        }
        self.count = l.count;
        self.bytes = l.bytes;
        self.marks = l.marks;
    }
}

impl Qdisc for PyQdisc {
    fn enqueue(&mut self, pkt: Packet, now: Time, drops: &mut Drops) -> Verdict {
        pin_thread_state();
        let r = Python::attach(|py| -> Result<Verdict, Failure> {
            let (slot, serial) = {
                let mut l = self.ledger.borrow_mut(py);
                l.active = true;
                l.admit(&pkt)
            };
            let obj = Py::new(
                py,
                PyPacket::new(pkt, slot, serial, self.ledger.clone_ref(py)),
            )
            .map_err(|e| self.raised(py, "enqueue", now, e))?;
            let ret = self.call(
                py,
                &self.enqueue,
                "enqueue",
                (obj.clone_ref(py), now.0),
                now,
            )?;
            let ledger = self.ledger.clone_ref(py);
            let mut l = ledger.borrow_mut(py);
            let accepted = match ret.bind(py).cast::<PyBool>() {
                Ok(b) => b.is_true(),
                Err(_) => {
                    l.active = false;
                    let shown = ret
                        .bind(py)
                        .repr()
                        .map(|r| r.to_string())
                        .unwrap_or_default();
                    return Err(self.fail(
                        "enqueue",
                        now,
                        format!(
                            "returned {shown}; the contract is True (queued) or False (dropped)"
                        ),
                        None,
                    ));
                }
            };
            let held = l.holds(slot, serial);
            let verdict = match (accepted, held) {
                (true, true) => Verdict::Queued,
                (true, false) => {
                    l.active = false;
                    return Err(self.fail(
                        "enqueue",
                        now,
                        "returned True for the packet it dropped".into(),
                        None,
                    ));
                }
                (false, held) => {
                    if held {
                        // Refused without a reason given: the tail drop of a full queue.
                        let p = obj.borrow(py).pkt;
                        l.release(slot, &p);
                        l.drops.push((p, DropReason::Overlimit));
                    }
                    Verdict::Dropped
                }
            };
            self.settle(&mut l, drops);
            Ok(verdict)
        });
        r.unwrap_or_else(|f| f.raise())
    }

    fn dequeue(&mut self, now: Time, drops: &mut Drops) -> Dequeue {
        pin_thread_state();
        let r = Python::attach(|py| -> Result<Dequeue, Failure> {
            self.ledger.borrow_mut(py).active = true;
            let ret = self.call(py, &self.dequeue, "dequeue", (now.0,), now)?;
            let ledger = self.ledger.clone_ref(py);
            let mut l = ledger.borrow_mut(py);
            let ret = ret.bind(py);
            if ret.is_none() {
                self.settle(&mut l, drops);
                return Ok(Dequeue::Empty);
            }
            let Ok(p) = ret.cast::<PyPacket>() else {
                l.active = false;
                let shown = ret.repr().map(|r| r.to_string()).unwrap_or_default();
                return Err(self.fail(
                    "dequeue",
                    now,
                    format!("returned {shown}; the contract is a packet it holds, or None"),
                    None,
                ));
            };
            let p = p.borrow();
            if !p.ledger.is(&ledger) || !l.holds(p.slot, p.serial) {
                l.active = false;
                return Err(self.fail(
                    "dequeue",
                    now,
                    format!(
                        "returned packet uid {} which it does not hold (dequeued or dropped \
                         before, or another discipline's)",
                        p.pkt.uid
                    ),
                    None,
                ));
            }
            let pkt = p.pkt;
            l.release(p.slot, &pkt);
            self.settle(&mut l, drops);
            Ok(Dequeue::Packet(pkt))
        });
        r.unwrap_or_else(|f| f.raise())
    }

    fn len_packets(&self) -> usize {
        self.count
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn ecn_marks(&self) -> u64 {
        self.marks
    }

    /// At each time-series sample: `len(discipline)` (and its `bytes`, if it has them)
    /// must agree with what it holds (the contract's `__len__`), the cheap check that the
    /// class has not lost a packet.
    fn observe(&mut self, now: Time, _emit: &mut dyn FnMut(&str, f64)) {
        let r = Python::attach(|py| -> Result<(), Failure> {
            let inst = self.inst.bind(py);
            if self.has_bytes {
                let b = inst
                    .getattr("bytes")
                    .and_then(|b| b.extract::<u64>())
                    .map_err(|e| self.raised(py, "bytes", now, e))?;
                if b != self.bytes {
                    return Err(self.fail(
                        "bytes",
                        now,
                        format!("says {b} but the discipline holds {} bytes", self.bytes),
                        None,
                    ));
                }
            }
            let n = inst.len().map_err(|e| self.raised(py, "__len__", now, e))?;
            if n != self.count {
                return Err(self.fail(
                    "__len__",
                    now,
                    format!(
                        "says {n} packets but the discipline holds {} (enqueued, neither \
                         dequeued nor dropped)",
                        self.count
                    ),
                    None,
                ));
            }
            Ok(())
        });
        if let Err(f) = r {
            f.raise()
        }
    }
}

/// Builds instances of a validated class: `cls(rng, **params)` per link.
pub(crate) struct PyFactory {
    cls: Py<PyAny>,
    params: Vec<(String, Value)>,
    at: Arc<Where>,
    needs_conntrack: bool,
}

impl Factory for PyFactory {
    fn label(&self) -> String {
        self.at.label.clone()
    }

    fn build(&self, ctx: &BuildCtx) -> ExternalQdisc {
        pin_thread_state();
        let r = Python::attach(|py| -> Result<ExternalQdisc, Failure> {
            let fail = |e: PyErr| {
                let what = e
                    .value(py)
                    .repr()
                    .map(|r| r.to_string())
                    .unwrap_or_default();
                Failure {
                    msg: format!(
                        "{}: constructing {} raised {what}; the run stopped and nothing was \
                         written",
                        self.at.path, self.at.label
                    ),
                    cause: Some(e),
                }
            };
            let kwargs = PyDict::new(py);
            for (k, v) in &self.params {
                kwargs
                    .set_item(k, crate::model::to_py(py, v).map_err(fail)?)
                    .map_err(fail)?;
            }
            let rng = Py::new(py, PyRng::new(ctx.seed)).map_err(fail)?;
            let inst = self
                .cls
                .bind(py)
                .call((rng,), Some(&kwargs))
                .map_err(fail)?;
            let enqueue = inst.getattr("enqueue").map_err(fail)?.unbind();
            let dequeue = inst.getattr("dequeue").map_err(fail)?.unbind();
            let has_bytes = inst.hasattr("bytes").map_err(fail)?;
            Ok(Box::new(PyQdisc {
                has_bytes,
                inst: inst.unbind(),
                enqueue,
                dequeue,
                ledger: Py::new(py, Ledger::new()).map_err(fail)?,
                at: self.at.clone(),
                count: 0,
                bytes: 0,
                marks: 0,
            }))
        });
        r.unwrap_or_else(|f| f.raise())
    }

    fn facts(&self) -> Facts {
        Facts {
            needs_conntrack: self.needs_conntrack,
            ..Facts::default()
        }
    }
}

/// The front's `sojourn.disciplines.Resolver`, in scope while an experiment is parsed.
pub(crate) struct PyResolver {
    pub(crate) obj: Py<PyAny>,
}

impl Resolver for PyResolver {
    fn registered(&self, kind: &str) -> bool {
        Python::attach(|py| {
            self.obj
                .call_method1(py, "registered", (kind,))
                .and_then(|r| r.extract::<bool>(py))
                .unwrap_or(false)
        })
    }

    fn resolve(&self, p: &mut Params, _ctx: &BuildCtx) -> ConfResult<Arc<dyn Factory>> {
        let module = p.str_opt("module")?.map(str::to_string);
        let class = p.str_opt("class")?.map(str::to_string);
        let rest: Vec<(String, Value)> = p
            .rest()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let path = p.path().to_string();
        Python::attach(|py| {
            let conf = |key: &str, msg: String| {
                ConfError::new(
                    if key.is_empty() {
                        path.clone()
                    } else {
                        sojourn_core::params::join(&path, key)
                    },
                    msg,
                )
            };
            let params = PyList::empty(py);
            for (k, v) in &rest {
                let v = crate::model::to_py(py, v).map_err(|e| conf(k, e.to_string()))?;
                params
                    .append((k.as_str(), v))
                    .map_err(|e| conf(k, e.to_string()))?;
            }
            let r = self
                .obj
                .call_method1(py, "resolve", (&path, module, class, params));
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    let v = e.value(py);
                    let key: String = v
                        .getattr("key")
                        .and_then(|k| k.extract())
                        .unwrap_or_default();
                    let msg: String = v
                        .getattr("msg")
                        .and_then(|k| k.extract())
                        .unwrap_or_else(|_| e.to_string());
                    return Err(conf(&key, msg));
                }
            };
            let (cls, label, needs_conntrack): (Py<PyAny>, String, bool) = r
                .extract(py)
                .map_err(|e| conf("", format!("the front's resolver answered badly: {e}")))?;
            Ok(Arc::new(PyFactory {
                cls,
                params: rest,
                at: Arc::new(Where {
                    path: path.clone(),
                    label,
                }),
                needs_conntrack,
            }) as Arc<dyn Factory>)
        })
    }
}

/// Whether any link of the experiment runs a Python discipline (children included): the
/// simulator then keeps the GIL for the whole run instead of taking it per call.
pub(crate) fn any_external(exp: &sojourn_experiment::Experiment) -> bool {
    exp.any_external_qdisc()
}

/// `Ecn` from its codepoint (0..=3).
pub(crate) fn ecn_of(v: u8) -> Option<Ecn> {
    Some(match v {
        0 => Ecn::NotEct,
        1 => Ecn::Ect1,
        2 => Ecn::Ect0,
        3 => Ecn::Ce,
        _ => return None,
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPacket>()?;
    m.add_class::<PyRng>()?;
    m.add("DisciplineError", m.py().get_type::<DisciplineError>())?;
    Ok(())
}
