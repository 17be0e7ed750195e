//! Disciplines implemented outside the core: the extension point through which a front
//! plugs in disciplines it runs itself (sojourn-py: a class written in Python,
//! docs/python-disciplines.md). The core knows no Python; it knows three things:
//!
//! - a [`Resolver`], which the front puts in scope while it parses an experiment
//!   ([`with_resolver`]): it validates what the file says of the discipline (`module`,
//!   `class`, its own parameters) and answers a [`Factory`];
//! - the [`Factory`], kept in the spec ([`ExternalSpec`]) as a built-in spec keeps its
//!   parameters, which builds one instance per link, a boxed [`Qdisc`];
//! - the `External` variant of `AnyQdisc` that holds that box. Built-in disciplines keep
//!   their own variants and their enum dispatch; only an external one pays a virtual call.
//!
//! An engine started without the front (the benchmark binary, a Rust test) has no resolver
//! in scope and refuses `kind = "python"` at parse time, naming the key.

use super::vocab::{BuildCtx, Discipline, Facts, NotLinux, Qdisc};
use crate::params::{ConfError, ConfResult, Params, Table, Value};
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// What an external discipline builds into: any [`Qdisc`] the front implements, movable to
/// the thread that runs the link (the emulator's forwarder runs on its own).
pub type ExternalQdisc = Box<dyn Qdisc + Send>;

/// Builds an external discipline's instances, one per link, as a built-in spec's
/// `build` does. The front makes it once the discipline was validated.
pub trait Factory: Send + Sync {
    /// How errors and `Debug` name the discipline (`MyAqm (my_aqm.py)`).
    fn label(&self) -> String;
    /// One instance for the link `ctx` describes, its randomness from `ctx.seed` (the
    /// link's own stream). Infallible as every build is: what could fail was checked by
    /// the resolver; a failure the front could not foresee (its constructor raising only
    /// for this seed) is the front's to carry out (sojourn-py unwinds with its own
    /// payload and catches it where it started the engine).
    fn build(&self, ctx: &BuildCtx) -> ExternalQdisc;
    /// What the discipline says of itself (e.g. that it reads `ct_bytes`, so the node must
    /// run conntrack).
    fn facts(&self) -> Facts {
        Facts::default()
    }
}

/// The front's validation of external disciplines, in scope while it parses an
/// experiment ([`with_resolver`]).
pub trait Resolver {
    /// Whether `kind` is a name the front registered for an external discipline (the
    /// Python API's `disciplines={"my_aqm": MyAqm}`); a spec naming it stands for
    /// `{ kind = "python", class = "my_aqm", … }` ([`registered_as_python`]).
    fn registered(&self, kind: &str) -> bool;
    /// Validates the discipline that `p` (the spec's table, `kind` already read) describes,
    /// reading every key it accepts (the rest are refused by the caller's `finish`);
    /// errors name the key path.
    fn resolve(&self, p: &mut Params, ctx: &BuildCtx) -> ConfResult<Arc<dyn Factory>>;
}

thread_local! {
    static RESOLVER: RefCell<Option<Rc<dyn Resolver>>> = const { RefCell::new(None) };
}

/// Runs `f` (a parse) with `resolver` in scope on this thread, restoring the previous one
/// after, also when `f` unwinds.
pub fn with_resolver<R>(resolver: Rc<dyn Resolver>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn Resolver>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            RESOLVER.with(|r| *r.borrow_mut() = prev);
        }
    }
    let prev = RESOLVER.with(|r| r.borrow_mut().replace(resolver));
    let _restore = Restore(prev);
    f()
}

fn current() -> Option<Rc<dyn Resolver>> {
    RESOLVER.with(|r| r.borrow().clone())
}

/// The experiment-file name of an external discipline.
pub const KIND: &str = <ExternalSpec as Discipline>::KIND;

/// A registered name (`qdisc = "my_aqm"` or `{ kind = "my_aqm", … }`) as the table of the
/// `python` spec it stands for: `kind = "python"`, `class = "my_aqm"`, the other keys as
/// written. `None` when no resolver in scope registered `kind`. (The registry asks through
/// `Discipline::claim` when no discipline declares `kind`.)
pub fn registered_as_python(kind: &str, table: &Table) -> Option<Table> {
    let resolver = current()?;
    if kind == KIND || !resolver.registered(kind) {
        return None;
    }
    let mut t = Table::default();
    t.0.push(("kind".into(), Value::Str(KIND.into())));
    t.0.push(("class".into(), Value::Str(kind.into())));
    t.0.extend(
        table
            .0
            .iter()
            .filter(|(k, _)| k != "kind")
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    Some(t)
}

/// The spec of an external discipline: the key path it was written at and its factory.
#[derive(Clone)]
pub struct ExternalSpec {
    /// The spec's key path (`topology.bottleneck.qdisc`), which the front's run-time
    /// errors name.
    pub path: String,
    factory: Arc<dyn Factory>,
}

impl ExternalSpec {
    /// A spec around a factory the front made itself (sojourn-py's trace recorder wraps a
    /// built-in discipline this way).
    pub fn new(path: impl Into<String>, factory: Arc<dyn Factory>) -> ExternalSpec {
        ExternalSpec {
            path: path.into(),
            factory,
        }
    }

    /// How errors name the discipline.
    pub fn label(&self) -> String {
        self.factory.label()
    }
}

impl PartialEq for ExternalSpec {
    /// The same factory: two parses of one file give two specs that are not equal, as two
    /// imports of a class are two classes.
    fn eq(&self, other: &ExternalSpec) -> bool {
        Arc::ptr_eq(&self.factory, &other.factory) && self.path == other.path
    }
}

impl fmt::Debug for ExternalSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalSpec")
            .field("path", &self.path)
            .field("factory", &self.factory.label())
            .finish()
    }
}

impl Discipline for ExternalSpec {
    const KIND: &'static str = "python";
    const SUMMARY: &'static str = "a discipline written in Python: module, class and its own \
         parameters (docs/python-disciplines.md)";
    type Qdisc = ExternalQdisc;

    fn parse(p: &mut Params, ctx: &BuildCtx) -> ConfResult<Self> {
        let Some(resolver) = current() else {
            return Err(ConfError::new(
                p.key_path("kind"),
                "a Python discipline runs only from sojourn's Python front (`sojourn run`, \
                 `sojourn.run`, `sojourn emulate`); this engine was started without it",
            ));
        };
        let factory = resolver.resolve(p, ctx)?;
        Ok(ExternalSpec {
            path: p.path().to_string(),
            factory,
        })
    }

    fn build(&self, ctx: &BuildCtx) -> ExternalQdisc {
        self.factory.build(ctx)
    }

    fn tc_args(&self) -> Result<Vec<String>, NotLinux> {
        Err(NotLinux::new(
            KIND,
            "a Python discipline has no Linux qdisc; run it live with `sojourn emulate`",
        ))
    }

    fn facts(&self) -> Facts {
        self.factory.facts()
    }

    fn claim(kind: &str, table: &Table) -> Option<Table> {
        registered_as_python(kind, table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Packet;
    use crate::qdisc::{AnyQdisc, Dequeue, Drops, QdiscSpec, Verdict};
    use crate::time::Time;
    use std::collections::VecDeque;

    /// A FIFO without limit, standing for a front's discipline.
    struct Fifo(VecDeque<Packet>);
    impl Qdisc for Fifo {
        fn enqueue(&mut self, pkt: Packet, _now: Time, _drops: &mut Drops) -> Verdict {
            self.0.push_back(pkt);
            Verdict::Queued
        }
        fn dequeue(&mut self, _now: Time, _drops: &mut Drops) -> Dequeue {
            self.0.pop_front().map_or(Dequeue::Empty, Dequeue::Packet)
        }
        fn len_packets(&self) -> usize {
            self.0.len()
        }
        fn len_bytes(&self) -> u64 {
            self.0.iter().map(|p| p.len_bytes as u64).sum()
        }
        fn ecn_marks(&self) -> u64 {
            0
        }
    }
    struct FifoFactory;
    impl Factory for FifoFactory {
        fn label(&self) -> String {
            "Fifo (test)".into()
        }
        fn build(&self, _ctx: &BuildCtx) -> ExternalQdisc {
            Box::new(Fifo(VecDeque::new()))
        }
    }
    /// Knows the registered name `my_fifo` and accepts one key, `class`.
    struct TestResolver;
    impl Resolver for TestResolver {
        fn registered(&self, kind: &str) -> bool {
            kind == "my_fifo"
        }
        fn resolve(&self, p: &mut Params, _ctx: &BuildCtx) -> ConfResult<Arc<dyn Factory>> {
            match p.str_opt("class")? {
                Some("my_fifo") | Some("Fifo") => Ok(Arc::new(FifoFactory)),
                _ => Err(p.err("class", "no such class")),
            }
        }
    }

    fn table(kv: &[(&str, &str)]) -> Value {
        Value::Table(Table(
            kv.iter()
                .map(|(k, v)| (k.to_string(), Value::Str(v.to_string())))
                .collect(),
        ))
    }

    #[test]
    fn without_a_resolver_python_is_refused_at_its_kind() {
        let e = QdiscSpec::parse(
            &table(&[("kind", "python")]),
            "links.l.qdisc",
            &BuildCtx::default(),
        )
        .unwrap_err();
        assert_eq!(e.path, "links.l.qdisc.kind");
        assert!(e.msg.contains("Python front"), "{}", e.msg);
        // A registered name means nothing without the front that registered it.
        let e =
            QdiscSpec::parse(&Value::Str("my_fifo".into()), "q", &BuildCtx::default()).unwrap_err();
        assert!(e.msg.contains("unknown qdisc \"my_fifo\""), "{}", e.msg);
    }

    #[test]
    fn a_resolver_in_scope_builds_into_the_external_variant() {
        let r: Rc<dyn Resolver> = Rc::new(TestResolver);
        let spec = with_resolver(r.clone(), || {
            QdiscSpec::parse(
                &table(&[("kind", "python"), ("class", "Fifo")]),
                "q",
                &BuildCtx::default(),
            )
        })
        .unwrap();
        assert_eq!(spec.kind(), "python");
        assert!(spec
            .tc_args()
            .unwrap_err()
            .reason
            .contains("sojourn emulate"));
        let mut q = spec.build(&BuildCtx::default());
        assert!(matches!(q, AnyQdisc::External(_)));
        let mut drops = Drops::new();
        let p = Packet {
            uid: 7,
            len_bytes: 1500,
            ..Packet::default()
        };
        assert_eq!(q.enqueue(p, Time::ZERO, &mut drops), Verdict::Queued);
        assert_eq!((q.len_packets(), q.len_bytes()), (1, 1500));
        assert_eq!(
            q.dequeue(Time::ZERO, &mut drops).packet().map(|p| p.uid),
            Some(7)
        );
        // Unknown keys are refused by the registry's `finish`, with their path.
        let e = with_resolver(r.clone(), || {
            QdiscSpec::parse(
                &table(&[("kind", "python"), ("class", "Fifo"), ("limt", "5")]),
                "q",
                &BuildCtx::default(),
            )
        })
        .unwrap_err();
        assert_eq!(e.path, "q.limt");
        // A registered name stands for `{ kind = "python", class = NAME }`.
        let spec = with_resolver(r, || {
            QdiscSpec::parse(&Value::Str("my_fifo".into()), "q", &BuildCtx::default())
        })
        .unwrap();
        assert_eq!(spec.kind(), "python");
        // The resolver is out of scope again.
        assert!(
            QdiscSpec::parse(&table(&[("kind", "python")]), "q", &BuildCtx::default()).is_err()
        );
    }
}
