//! The registry: an experiment file names a discipline (`kind = "fq_codel"`) and its
//! parameters by their tc names; unknown kinds and keys are rejected with the key path.
//!
//! This module holds the machinery, generic over the spec type so that it names no
//! discipline: [`Kind`], one registered discipline; the lookups that turn a name and a
//! parameter table into a spec; and the `disciplines!` macro that `qdisc/mod.rs` invokes
//! with the list of every discipline (one line each, in the order `sojourn qdiscs` prints
//! them). From that list the macro declares the discipline modules, the typed
//! `QdiscSpec`, the `AnyQdisc` the engines run (enum dispatch: no virtual calls on the hot
//! path), `KINDS`, and every per-discipline `match`, each arm asking the discipline's own
//! [`Discipline`](super::vocab::Discipline) declaration.

use super::vocab::{BuildCtx, TcKey};
use crate::params::{closest, join, ConfError, ConfResult, Params, Table, Value};

/// Reads one discipline's parameters into its typed spec (`S` is `QdiscSpec`).
pub type Parser<S> = fn(&mut Params, &BuildCtx) -> ConfResult<S>;

/// One registered discipline, from its [`Discipline`](super::vocab::Discipline) declaration.
pub struct Kind<S: 'static> {
    pub name: &'static str,
    pub summary: &'static str,
    /// tc keywords → file keys; `None` when Linux has no such qdisc.
    pub tc_keys: Option<&'static [TcKey]>,
    /// The file key that holds the tc handle major this kind insists on (prio, CAKE).
    pub tc_handle_key: Option<&'static str>,
    pub parse: Parser<S>,
    /// A spec naming a kind no discipline declares, as this discipline's spec table.
    pub claim: fn(&str, &Table) -> Option<Table>,
}

/// Names of the registered disciplines, in registration order.
pub fn names<S>(kinds: &[Kind<S>]) -> Vec<&'static str> {
    kinds.iter().map(|k| k.name).collect()
}

/// The discipline an experiment file names (`fq-codel` is accepted for `fq_codel`);
/// otherwise an error at `path.kind` with the closest name and the known ones.
pub fn find<'a, S>(kinds: &'a [Kind<S>], kind: &str, path: &str) -> ConfResult<&'a Kind<S>> {
    kinds
        .iter()
        .find(|k| k.name == kind || k.name.replace('_', "-") == kind)
        .ok_or_else(|| {
            let names = names(kinds);
            let hint = closest(kind, &names)
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            ConfError::new(
                join(path, "kind"),
                format!("unknown qdisc {kind:?}{hint}; known: {}", names.join(", ")),
            )
        })
}

/// Parses discipline `kind` with parameters from `table` (its `kind` key is ignored) into
/// its typed spec, rejecting unknown kinds and keys with their path.
pub fn parse_kind<S>(
    kinds: &[Kind<S>],
    kind: &str,
    table: &Table,
    path: &str,
    ctx: &BuildCtx,
) -> ConfResult<S> {
    let k = match find(kinds, kind, path) {
        Ok(k) => k,
        // A name no discipline declares may be claimed by one (`Discipline::claim`: the
        // external discipline claims the names its front registered, qdisc/external.rs);
        // declared names come first.
        Err(e) => {
            return match kinds
                .iter()
                .find_map(|k| (k.claim)(kind, table).map(|t| (k.name, t)))
            {
                Some((name, t)) => parse_kind(kinds, name, &t, path, ctx),
                None => Err(e),
            }
        }
    };
    let mut p = Params::new(path, table);
    let _ = p.raw("kind");
    let q = (k.parse)(&mut p, ctx)?;
    p.finish()?;
    Ok(q)
}

/// Parses a spec: a bare kind (`"codel"`) or a table with `kind` and parameters. `path`
/// is the spec's key path, used in error messages.
pub fn parse_value<S>(
    kinds: &[Kind<S>],
    spec: &Value,
    path: &str,
    ctx: &BuildCtx,
) -> ConfResult<S> {
    match spec {
        Value::Str(kind) => parse_kind(kinds, kind, &Table::default(), path, ctx),
        Value::Table(t) => {
            let kind = match t.get("kind") {
                Some(Value::Str(k)) => k.clone(),
                Some(v) => {
                    return Err(ConfError::new(
                        join(path, "kind"),
                        format!("expected a string, got {}", v.type_name()),
                    ))
                }
                None => {
                    return Err(ConfError::new(
                        path,
                        format!("a qdisc needs `kind`; one of {}", names(kinds).join(", ")),
                    ))
                }
            };
            parse_kind(kinds, &kind, t, path, ctx)
        }
        v => Err(ConfError::new(
            path,
            format!(
                "expected a qdisc name or a table with `kind`, got {}",
                v.type_name()
            ),
        )),
    }
}

/// Declares every discipline from one list, in `qdisc/mod.rs`:
///
/// ```text
/// disciplines! {
///     fifo::{Pfifo(PfifoSpec), Bfifo(BfifoSpec)},
///     prio::{Prio(PrioSpec) + Classful, PfifoFast(PfifoFastSpec)},
/// }
/// ```
///
/// Each group is a module of `qdisc/` and the disciplines it declares, as
/// `Variant(SpecType)`: the variant's name in `QdiscSpec` and `AnyQdisc`, and the type that
/// implements `Discipline` (and `Classful` when marked `+ Classful`: it holds child specs).
/// Generated: `QdiscSpec`, `AnyQdisc` and its `Qdisc` impl, `KINDS`, `build`,
/// `build_kind`, `describe`, and `QdiscSpec`'s per-discipline methods. (The modules are
/// declared beside the list, not by the macro: rustfmt does not see modules a macro
/// declares, so `cargo fmt` would skip their files.) The generated code names the
/// vocabulary (`Qdisc`, `Discipline`, `BuildCtx`, `TcClass`, …), `Packet`, `Time`, `Value`, `Table` and
/// `ConfResult` as the invoking module has them in scope.
macro_rules! disciplines {
    ($($module:ident::{
        $($variant:ident($spec:ident) $(+ $classful:ident)?),+ $(,)?
    }),+ $(,)?) => {
        /// A validated discipline, composites included (their children are specs too):
        /// parsed once, built infallibly into an [`AnyQdisc`] as often as needed.
        #[derive(Clone, Debug, PartialEq)]
        pub enum QdiscSpec {
            $($($variant($module::$spec),)+)+
        }

        /// Every discipline, dispatched by `match` (no virtual calls on the hot path).
        pub enum AnyQdisc {
            $($($variant(<$module::$spec as Discipline>::Qdisc),)+)+
        }

        impl Qdisc for AnyQdisc {
            #[inline]
            fn enqueue(
                &mut self,
                pkt: Packet,
                now: Time,
                drops: &mut Drops,
            ) -> Verdict {
                match self { $($(AnyQdisc::$variant(q) => q.enqueue(pkt, now, drops),)+)+ }
            }
            #[inline]
            fn dequeue(
                &mut self,
                now: Time,
                drops: &mut Drops,
            ) -> Dequeue {
                match self { $($(AnyQdisc::$variant(q) => q.dequeue(now, drops),)+)+ }
            }
            #[inline]
            fn len_packets(&self) -> usize {
                match self { $($(AnyQdisc::$variant(q) => q.len_packets(),)+)+ }
            }
            #[inline]
            fn len_bytes(&self) -> u64 {
                match self { $($(AnyQdisc::$variant(q) => q.len_bytes(),)+)+ }
            }
            #[inline]
            fn backlog(&self) -> (usize, u64) {
                match self { $($(AnyQdisc::$variant(q) => q.backlog(),)+)+ }
            }
            fn ecn_marks(&self) -> u64 {
                match self { $($(AnyQdisc::$variant(q) => q.ecn_marks(),)+)+ }
            }
            fn observe(&mut self, now: Time, emit: &mut dyn FnMut(&str, f64)) {
                match self { $($(AnyQdisc::$variant(q) => q.observe(now, emit),)+)+ }
            }
        }

        /// Every discipline an experiment file can name, in the order of the list.
        pub static KINDS: &[$crate::qdisc::registry::Kind<QdiscSpec>] = {
            &[$($($crate::qdisc::registry::Kind {
                name: $module::$spec::KIND,
                summary: $module::$spec::SUMMARY,
                tc_keys: $module::$spec::TC_KEYS,
                tc_handle_key: $module::$spec::TC_HANDLE_KEY,
                parse: |p, c| Ok(QdiscSpec::$variant($module::$spec::parse(p, c)?)),
                claim: $module::$spec::claim,
            },)+)+]
        };

        /// Builds a discipline from a spec: either a bare kind (`"codel"`) or a table with
        /// `kind` and parameters. `path` is the spec's key path, used in error messages.
        /// (Parses into a [`QdiscSpec`] and builds it; engines keep the spec and build from
        /// it.)
        pub fn build(
            spec: &Value,
            path: &str,
            ctx: &BuildCtx,
        ) -> ConfResult<AnyQdisc> {
            Ok(QdiscSpec::parse(spec, path, ctx)?.build(ctx))
        }

        /// Builds discipline `kind` with parameters from `table` (its `kind` key is ignored).
        pub fn build_kind(
            kind: &str,
            table: &Table,
            path: &str,
            ctx: &BuildCtx,
        ) -> ConfResult<AnyQdisc> {
            Ok(QdiscSpec::parse_kind(kind, table, path, ctx)?.build(ctx))
        }

        /// `(name, summary)` for every discipline, for `sojourn qdiscs`.
        pub fn describe() -> Vec<(&'static str, &'static str)> {
            KINDS.iter().map(|k| (k.name, k.summary)).collect()
        }

        impl QdiscSpec {
            /// Parses and validates a spec: a bare kind (`"codel"`) or a table with `kind`
            /// and parameters. `path` is the spec's key path, used in error messages.
            pub fn parse(
                spec: &Value,
                path: &str,
                ctx: &BuildCtx,
            ) -> ConfResult<QdiscSpec> {
                $crate::qdisc::registry::parse_value(KINDS, spec, path, ctx)
            }

            /// Parses discipline `kind` with parameters from `table` (its `kind` key is
            /// ignored), rejecting unknown kinds and keys with their path.
            pub fn parse_kind(
                kind: &str,
                table: &Table,
                path: &str,
                ctx: &BuildCtx,
            ) -> ConfResult<QdiscSpec> {
                $crate::qdisc::registry::parse_kind(KINDS, kind, table, path, ctx)
            }

            /// Builds the discipline (children get `ctx.child(i)`, as the kernel gives each
            /// qdisc its own state). Never fails: everything that could was checked by
            /// `parse`.
            pub fn build(&self, ctx: &BuildCtx) -> AnyQdisc {
                match self { $($(QdiscSpec::$variant(s) => AnyQdisc::$variant(s.build(ctx)),)+)+ }
            }

            /// The experiment-file name of the discipline (`"fq_codel"`).
            pub fn kind(&self) -> &'static str {
                match self { $($(QdiscSpec::$variant(_) => $module::$spec::KIND,)+)+ }
            }

            /// What this node says of itself ([`Facts`](crate::qdisc::vocab::Facts));
            /// children are not looked at.
            pub fn facts(&self) -> Facts {
                match self { $($(QdiscSpec::$variant(s) => s.facts(),)+)+ }
            }

            /// tc's kind and arguments of this node alone (children are separate nodes).
            /// The kind is this discipline's own except for `age` with `count =
            /// "priority"`, which is prio.
            pub fn tc_args(
                &self,
            ) -> Result<(&'static str, Vec<String>), NotLinux> {
                match self { $($(QdiscSpec::$variant(s) => Ok((s.tc_kind(), s.tc_args()?)),)+)+ }
            }

            /// The child specs of a composite (prio bands, age levels, tbf's inner qdisc),
            /// in class order.
            pub fn children(&self) -> Vec<&QdiscSpec> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@children s $($classful)?),)+)+
                }
            }

            /// The children that get tc lines of their own (see `Classful::tc_children`).
            pub fn tc_children(&self) -> Vec<&QdiscSpec> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@tc_children s $($classful)?),)+)+
                }
            }

            /// The class minor each of `tc_children` hangs from (`Classful::tc_child_minors`).
            pub fn tc_child_minors(&self) -> Vec<u16> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@tc_child_minors s $($classful)?),)+)+
                }
            }

            /// This node's own `tc class` lines (`Classful::tc_classes`), children not
            /// looked at.
            pub fn tc_classes(&self) -> Result<Vec<TcClass>, NotLinux> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@tc_classes s $($classful)?),)+)+
                }
            }

            /// This node's own `tc filter` arguments (`Classful::tc_filters`).
            pub fn tc_filters(&self) -> Result<Vec<String>, NotLinux> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@tc_filters s $($classful)?),)+)+
                }
            }

            /// Hangs children read from a tc tree (by class minor) under this node.
            pub fn attach(
                &mut self,
                children: Vec<(u16, QdiscSpec)>,
            ) -> ConfResult<()> {
                match self {
                    $($(QdiscSpec::$variant(s) => disciplines!(@attach s children $($classful)?),)+)+
                }
            }
        }
    };
    (@children $s:ident) => {{ let _ = $s; Vec::new() }};
    (@children $s:ident Classful) => { Classful::children($s) };
    (@tc_children $s:ident) => {{ let _ = $s; Vec::new() }};
    (@tc_children $s:ident Classful) => { Classful::tc_children($s) };
    (@tc_child_minors $s:ident) => {{ let _ = $s; Vec::new() }};
    (@tc_child_minors $s:ident Classful) => { Classful::tc_child_minors($s) };
    (@tc_classes $s:ident) => {{ let _ = $s; Ok(Vec::new()) }};
    (@tc_classes $s:ident Classful) => { Classful::tc_classes($s) };
    (@tc_filters $s:ident) => {{ let _ = $s; Ok(Vec::new()) }};
    (@tc_filters $s:ident Classful) => { Classful::tc_filters($s) };
    (@attach $s:ident $c:ident) => { $crate::qdisc::registry::no_classes($s, $c) };
    (@attach $s:ident $c:ident Classful) => { Classful::attach($s, $c) };
}

/// What a discipline without classes answers to children read from a tc tree.
pub fn no_classes<S: super::vocab::Discipline, C>(_spec: &S, _children: Vec<C>) -> ConfResult<()> {
    Err(ConfError::new(
        "tc",
        format!("{} has no classes to attach children to", S::KIND),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::{build, AnyQdisc, Qdisc};

    #[test]
    fn unknown_kind_and_key_are_rejected_with_path() {
        let e = build(
            &Value::Str("pfifi".into()),
            "links.x.qdisc",
            &BuildCtx::default(),
        )
        .err()
        .unwrap();
        assert_eq!(e.path, "links.x.qdisc.kind");
        assert!(e.msg.contains("did you mean \"pfifo\""), "{}", e.msg);
        let t = Table(vec![
            ("kind".into(), Value::Str("pfifo".into())),
            ("limt".into(), Value::Int(5)),
        ]);
        let e = build(&Value::Table(t), "q", &BuildCtx::default())
            .err()
            .unwrap();
        assert_eq!(e.path, "q.limt");
    }

    #[test]
    fn defaults_follow_linux() {
        // pfifo/bfifo default limits come from tx_queue_len (1000) and psched_mtu (1514).
        let q = build(&Value::Str("pfifo".into()), "q", &BuildCtx::default()).unwrap();
        match q {
            AnyQdisc::Pfifo(f) => assert_eq!(f.limit(), 1000),
            _ => panic!(),
        }
        let q = build(&Value::Str("bfifo".into()), "q", &BuildCtx::default()).unwrap();
        match q {
            AnyQdisc::Bfifo(f) => assert_eq!(f.limit(), 1_514_000),
            _ => panic!(),
        }
        let q = build(
            &Value::Str("pfifo_head_drop".into()),
            "q",
            &BuildCtx::default(),
        )
        .unwrap();
        assert_eq!(q.len_packets(), 0);
    }
}
