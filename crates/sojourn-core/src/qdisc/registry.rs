//! The registry: an experiment file names a discipline (`kind = "fq_codel"`) and its
//! parameters by their tc names; unknown kinds and keys are rejected with the key path.

use super::spec::QdiscSpec;
use super::{
    age, cake, cocoa, codel, dualpi2, fifo, fq, fq_codel, fq_pie, las, lstf_codel, pie, prio, red,
    sfq, srpt, tbf, AnyQdisc,
};
use crate::params::{ConfError, ConfResult, Params, Table, Value};
use crate::rng::{splitmix64_mix, Rng};

/// What a discipline may know about where it is installed.
#[derive(Clone, Debug)]
pub struct BuildCtx {
    /// `psched_mtu`: device MTU + hard header length (1514 on Ethernet).
    pub mtu_bytes: u32,
    /// The device's `tx_queue_len` (1000): default pfifo/prio limits.
    pub tx_queue_len: u32,
    /// Rate of the link the qdisc feeds, bit/s (0 if unknown or variable).
    pub link_rate_bps: u64,
    /// Seed of this qdisc instance's random stream (derived from the master seed and the link).
    pub seed: u64,
}

impl Default for BuildCtx {
    fn default() -> Self {
        BuildCtx {
            mtu_bytes: 1514,
            tx_queue_len: 1000,
            link_rate_bps: 0,
            seed: 1,
        }
    }
}

impl BuildCtx {
    /// The context for child `i` of a composite discipline: same device, its own stream.
    pub fn child(&self, i: u64) -> BuildCtx {
        BuildCtx {
            seed: splitmix64_mix(self.seed ^ (i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ..self.clone()
        }
    }
    /// This instance's random generator.
    pub fn rng(&self) -> Rng {
        Rng::from_seed(self.seed)
    }
    /// A per-instance salt for flow hashing (the kernel's per-boot hash seed).
    pub fn hash_salt(&self) -> u64 {
        splitmix64_mix(self.seed ^ 0x5a17)
    }
}

/// Reads one discipline's parameters into its typed spec.
type Parser = fn(&mut Params, &BuildCtx) -> ConfResult<QdiscSpec>;

/// One registered discipline.
pub struct Kind {
    pub name: &'static str,
    pub summary: &'static str,
    parse: Parser,
}

/// Every discipline an experiment file can name.
pub static KINDS: &[Kind] = &[
    Kind {
        name: "pfifo",
        summary: "FIFO with a packet limit (default tx_queue_len = 1000)",
        parse: |p, c| Ok(QdiscSpec::Pfifo(fifo::FifoSpec::parse_pfifo(p, c)?)),
    },
    Kind {
        name: "bfifo",
        summary: "FIFO with a byte limit (default 1000 x 1514 B)",
        parse: |p, c| Ok(QdiscSpec::Bfifo(fifo::FifoSpec::parse_bfifo(p, c)?)),
    },
    Kind {
        name: "pfifo_head_drop",
        summary: "FIFO that drops the oldest packet when full",
        parse: |p, c| {
            Ok(QdiscSpec::PfifoHeadDrop(fifo::FifoSpec::parse_head_drop(
                p, c,
            )?))
        },
    },
    Kind {
        name: "codel",
        summary: "CoDel AQM over one FIFO (RFC 8289, Linux sch_codel)",
        parse: |p, c| Ok(QdiscSpec::Codel(codel::CodelSpec::parse(p, c)?)),
    },
    Kind {
        name: "fq_codel",
        summary: "flow queueing with per-flow CoDel (RFC 8290, Linux sch_fq_codel)",
        parse: |p, c| Ok(QdiscSpec::FqCodel(fq_codel::FqCodelSpec::parse(p, c)?)),
    },
    Kind {
        name: "fq",
        summary: "Linux fq: per-flow fair queueing with pacing, 3 WRR bands (6.18)",
        parse: |p, c| Ok(QdiscSpec::Fq(fq::FqConfig::from_params(p, c)?)),
    },
    Kind {
        name: "cocoa",
        summary: "CoCoA/TRAQ: fq with a learned per-flow buffer limit (seed 003)",
        parse: |p, c| Ok(QdiscSpec::Cocoa(cocoa::CocoaSpec::parse(p, c)?)),
    },
    Kind {
        name: "cake",
        summary:
            "CAKE: shaper + diffserv tins + 8-way set-associative FQ with host isolation + COBALT",
        parse: |p, c| Ok(QdiscSpec::Cake(cake::CakeConfig::parse(p, c)?)),
    },
    Kind {
        name: "pie",
        summary: "PIE: PI-controlled early drop on queueing delay (RFC 8033, Linux sch_pie)",
        parse: |p, c| Ok(QdiscSpec::Pie(pie::PieSpec::parse(p, c)?)),
    },
    Kind {
        name: "fq_pie",
        summary: "FQ-PIE: DRR over hashed flows, each with its own PIE (Linux sch_fq_pie)",
        parse: |p, c| Ok(QdiscSpec::FqPie(fq_pie::FqPieSpec::parse(p, c)?)),
    },
    Kind {
        name: "dualpi2",
        summary: "DualQ Coupled AQM with PI2: L4S and classic queues (RFC 9332, Linux sch_dualpi2)",
        parse: |p, c| Ok(QdiscSpec::DualPi2(dualpi2::DualPi2Spec::parse(p, c)?)),
    },
    Kind {
        name: "sfq",
        summary: "Stochastic Fairness Queueing: hashed slots served round robin (Linux sch_sfq)",
        parse: |p, c| Ok(QdiscSpec::Sfq(sfq::SfqSpec::parse(p, c)?)),
    },
    Kind {
        name: "red",
        summary: "Random Early Detection on the average byte backlog (Linux sch_red)",
        parse: |p, c| Ok(QdiscSpec::Red(red::RedSpec::parse(p, c)?)),
    },
    Kind {
        name: "prio",
        summary: "Strict priority over child qdiscs chosen by skb->priority (Linux sch_prio)",
        parse: |p, c| Ok(QdiscSpec::Prio(prio::PrioSpec::parse(p, c)?)),
    },
    Kind {
        name: "pfifo_fast",
        summary: "Linux's default 3-band priority FIFO (priority & 15 through the priomap)",
        parse: |p, c| Ok(QdiscSpec::PfifoFast(prio::PfifoFastSpec::parse(p, c)?)),
    },
    Kind {
        name: "tbf",
        summary: "Token bucket shaper over a child qdisc (Linux sch_tbf)",
        parse: |p, c| Ok(QdiscSpec::Tbf(tbf::TbfSpec::parse(p, c)?)),
    },
    Kind {
        name: "lstf_codel",
        summary: "LSTFCoDel: CoDel over a least-slack-time-first priority queue (seed 004)",
        parse: |p, c| {
            Ok(QdiscSpec::LstfCodel(lstf_codel::LstfCodelSpec::parse(
                p, c,
            )?))
        },
    },
    Kind {
        name: "age",
        summary: "age-based 2LPS/MLPS: byte thresholds -> strict-priority levels of any child",
        parse: |p, c| Ok(QdiscSpec::Age(age::AgeSpec::parse(p, c)?)),
    },
    Kind {
        name: "las",
        summary: "LAS / foreground-background: least attained service first (reference)",
        parse: |p, c| Ok(QdiscSpec::Las(las::LasSpec::parse(p, c)?)),
    },
    Kind {
        name: "srpt",
        summary: "SRPT oracle: least remaining flow bytes first (reference, pkt.remaining_bytes)",
        parse: |p, c| Ok(QdiscSpec::Srpt(srpt::SrptSpec::parse(p, c)?)),
    },
];

/// Builds a discipline from a spec: either a bare kind (`"codel"`) or a table with `kind`
/// and parameters. `path` is the spec's key path, used in error messages.
/// (Parses into a [`QdiscSpec`] and builds it; engines keep the spec and build from it.)
pub fn build(spec: &Value, path: &str, ctx: &BuildCtx) -> ConfResult<AnyQdisc> {
    Ok(QdiscSpec::parse(spec, path, ctx)?.build(ctx))
}

/// Builds discipline `kind` with parameters from `table` (its `kind` key is ignored).
pub fn build_kind(kind: &str, table: &Table, path: &str, ctx: &BuildCtx) -> ConfResult<AnyQdisc> {
    Ok(parse_kind(kind, table, path, ctx)?.build(ctx))
}

/// Parses discipline `kind` with parameters from `table` (its `kind` key is ignored) into
/// its typed spec, rejecting unknown kinds and keys with their path.
pub fn parse_kind(kind: &str, table: &Table, path: &str, ctx: &BuildCtx) -> ConfResult<QdiscSpec> {
    let k = KINDS
        .iter()
        .find(|k| k.name == kind || k.name.replace('_', "-") == kind)
        .ok_or_else(|| {
            let names = names();
            let hint = crate::params::closest(kind, &names)
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            ConfError::new(
                crate::params::join(path, "kind"),
                format!("unknown qdisc {kind:?}{hint}; known: {}", names.join(", ")),
            )
        })?;
    let mut p = Params::new(path, table);
    let _ = p.raw("kind");
    let q = (k.parse)(&mut p, ctx)?;
    p.finish()?;
    Ok(q)
}

/// Names of all registered disciplines.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).collect()
}

/// `(name, summary)` for every discipline, for `sojourn qdiscs`.
pub fn describe() -> Vec<(&'static str, &'static str)> {
    KINDS.iter().map(|k| (k.name, k.summary)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::Qdisc;

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
