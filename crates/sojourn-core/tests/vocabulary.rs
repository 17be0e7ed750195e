//! The output vocabulary and the forwarding of a boxed discipline, pinned by mutation
//! testing (docs/testing.md, session 6).

use sojourn_core::params::{Table, Value};
use sojourn_core::qdisc::testkit::pkt;
use sojourn_core::qdisc::{build, AnyQdisc, BuildCtx, DropReason, Drops, Qdisc};
use sojourn_core::Time;

/// The drop reasons summary.json counts, as docs/output-schema.md lists them.
#[test]
fn drop_reason_names_are_the_documented_ones() {
    let names: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(
        names,
        vec![
            "overlimit",
            "aqm",
            "early",
            "fattest_flow",
            "flow_limit",
            "memory",
            "head_drop",
            "no_slot",
            "horizon",
            "standing_queue",
            "link_loss"
        ]
    );
}

/// A boxed discipline (as composite disciplines hold their children) reports what the
/// discipline inside reports: a pfifo that carried three packets marked none.
#[test]
fn a_boxed_discipline_forwards_its_counters() {
    let mut t = Table::default();
    t.insert("kind", Value::Str("pfifo".into()));
    let mut q: Box<AnyQdisc> =
        Box::new(build(&Value::Table(t), "q", &BuildCtx::default()).unwrap());
    let mut d = Drops::new();
    for i in 0..3 {
        q.enqueue(pkt(i, 1, 1000), Time(0), &mut d);
    }
    assert_eq!((q.len_packets(), q.len_bytes()), (3, 3000));
    assert_eq!(q.ecn_marks(), 0);
}
