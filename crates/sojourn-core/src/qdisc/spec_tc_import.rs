//! Reading tc's own words back into specs, pinned by mutation testing (docs/testing.md,
//! "Scores (session 7)"); a child module of `spec`, so that CI's `cargo mutants --in-diff
//! … -- --lib` runs it when spec.rs changes. Every truth here is tc's (iproute2 `get_size`
//! / `get_rate64`, `tc(8)` "PARAMETERS") or the kernel's, and each number was also read
//! back from the real kernel of the development machine (Linux 6.18, iproute2's `tc`, in a
//! throw-away network namespace): `tc qdisc replace dev X root handle 1: bfifo limit SIZE`
//! then `tc -j qdisc show` gives the byte count Linux holds; `tbf rate RATE …` gives its
//! bytes per second.

use super::{parse_tc_rate, parse_tc_size, NotLinux, QdiscSpec, TcNode, TcParent};
use crate::params::Value;
use crate::qdisc::BuildCtx;

fn ctx() -> BuildCtx {
    BuildCtx::default()
}

fn node(parent: TcParent, handle: u16, kind: &'static str, args: &[&str]) -> TcNode {
    TcNode {
        parent,
        handle,
        kind,
        args: args.iter().map(|s| s.to_string()).collect(),
    }
}

fn tbf_root() -> TcNode {
    node(
        TcParent::Root,
        1,
        "tbf",
        &["rate", "10mbit", "burst", "10kb", "limit", "30kb"],
    )
}

// ---------------------------------------------------------------------------------------
// Sizes: iproute2 `get_size` (lib/utils_math.c). A bare number or `b` is bytes; `k`/`kb`,
// `m`/`mb`, `g`/`gb` are powers of 1024 (any case); `kbit`, `mbit`, `gbit` are the same
// powers divided by 8 (so "1gbit" as a SIZE is 2^30 / 8 bytes, not 10^9 bits). The double
// is converted to an unsigned integer: fractions are truncated.
// ---------------------------------------------------------------------------------------

/// Each unit of `get_size`, as the kernel stored it (`bfifo limit SIZE`, read back).
#[test]
fn sizes_follow_tc_get_size() {
    let table: &[(&str, u64)] = &[
        ("1000", 1000),
        ("1000b", 1000),
        ("1k", 1024),
        ("1kb", 1024),
        ("1K", 1024),
        ("2.5kb", 2560),
        ("1m", 1_048_576),
        ("1mb", 1_048_576),
        ("1MB", 1_048_576),
        ("1g", 1_073_741_824),
        ("1gb", 1_073_741_824),
        ("1kbit", 128),
        ("8kbit", 1024),
        ("1mbit", 131_072),
        ("3mbit", 393_216),
        ("1gbit", 134_217_728),
        ("1Gbit", 134_217_728),
        ("0.5gbit", 67_108_864),
        ("4294967295", 4_294_967_295),
    ];
    for &(s, bytes) in table {
        assert_eq!(parse_tc_size(s), Some(bytes), "tc size {s:?}");
    }
}

/// strtod's number syntax: a decimal point, an exponent with either sign; the unit follows.
#[test]
fn sizes_take_strtod_numbers() {
    let table: &[(&str, u64)] = &[
        ("1.5e3", 1500),
        ("1e3b", 1000),
        ("1e+3", 1000),
        ("5e-1kb", 512),
        ("2e1kb", 20_480),
    ];
    for &(s, bytes) in table {
        assert_eq!(parse_tc_size(s), Some(bytes), "tc size {s:?}");
    }
}

/// `*size = sz` converts the double to an integer by truncation: the kernel holds 1 byte
/// for "1.7", 76 for "0.6kbit" (76.8), 2046 for "1.999k" (2046.976), 0 for "0.9".
#[test]
fn fractional_sizes_are_truncated_like_tc() {
    let table: &[(&str, u64)] = &[
        ("1.7", 1),
        ("1000.9", 1000),
        ("0.6kbit", 76),
        ("1.999k", 2046),
        ("0.9", 0),
    ];
    for &(s, bytes) in table {
        assert_eq!(parse_tc_size(s), Some(bytes), "tc size {s:?}");
    }
}

/// What tc refuses ("Illegal value for \"limit\""): an unknown unit, a negative size, an
/// exponent beyond a double, 2^64 bytes.
#[test]
fn sizes_tc_refuses_are_refused() {
    for s in [
        "1x",
        "1kib",
        "-1",
        "-0.5",
        "1e999",
        "18446744073709551616",
        "",
        "kb",
    ] {
        assert_eq!(parse_tc_size(s), None, "tc size {s:?}");
    }
}

/// The same through a tc line: `bfifo limit 1gbit` holds 134 217 728 bytes.
#[test]
fn a_bfifo_line_reads_its_limit_in_tc_units() {
    for (word, bytes) in [
        ("1gbit", 134_217_728u64),
        ("1mb", 1_048_576),
        ("8kbit", 1024),
    ] {
        match QdiscSpec::from_tc_args("bfifo", &["limit", word], &ctx()).unwrap() {
            QdiscSpec::Bfifo(f) => assert_eq!(f.limit, bytes, "bfifo limit {word}"),
            other => panic!("bfifo read as {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Rates: iproute2 `get_rate64`. `bit` (or a bare number) is bit/s; `kbit`, `mbit`, `gbit`,
// `tbit` decimal; `kibit`, `mibit`, `gibit` binary; `bps`, `kbps`, `mbps`, `gbps` bytes per
// second (×8). The kernel keeps bytes/s: 1gbit → 125 000 000 B/s = 10^9 bit/s.
// ---------------------------------------------------------------------------------------

#[test]
fn rates_follow_tc_get_rate() {
    let table: &[(&str, u64)] = &[
        ("8000", 8000),
        ("8bit", 8),
        ("1kbit", 1000),
        ("1mbit", 1_000_000),
        ("2.5mbit", 2_500_000),
        ("1gbit", 1_000_000_000),
        ("1Gbit", 1_000_000_000),
        ("1tbit", 1_000_000_000_000),
        ("1kibit", 1024),
        ("1mibit", 1_048_576),
        ("1gibit", 1_073_741_824),
        ("8bps", 64),
        ("1kbps", 8000),
        ("1mbps", 8_000_000),
        ("1gbps", 8_000_000_000),
    ];
    for &(s, bps) in table {
        assert_eq!(parse_tc_rate(s), Some(bps), "tc rate {s:?}");
    }
    assert_eq!(parse_tc_rate("1kbitx"), None);
    match QdiscSpec::from_tc_args(
        "tbf",
        &["rate", "1gbit", "burst", "100kb", "limit", "100kb"],
        &ctx(),
    )
    .unwrap()
    {
        QdiscSpec::Tbf(t) => {
            assert_eq!(t.rate_bps, 1_000_000_000);
            assert_eq!(t.burst_bytes, 102_400);
        }
        other => panic!("tbf read as {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Trees: where a child may hang.
// ---------------------------------------------------------------------------------------

/// sch_tbf has one class and finds it for every classid (`tbf_find` returns 1 whatever the
/// minor; `tbf_dump_class` reports it as `:1`). On Linux 6.18 `tc qdisc add dev X parent
/// 1:2 handle 2: pfifo limit 7` under `tbf` at `1:` succeeds, `tc qdisc show` prints
/// `parent 1:2` and `tc class show` lists class `1:1` with leaf `2:`; `parent 1:` and
/// `parent 1:ffff` are accepted the same way. A tree read from such a `tc qdisc show`
/// means the same tbf with that pfifo as its child.
#[test]
fn a_tbf_child_at_any_minor_is_its_one_class() {
    for minor in [1u16, 2, 0, 0xffff] {
        let tree = vec![
            tbf_root(),
            node(TcParent::Class(1, minor), 2, "pfifo", &["limit", "7"]),
        ];
        match QdiscSpec::from_tc(&tree, &ctx()).unwrap_or_else(|e| panic!("1:{minor:x}: {e}")) {
            QdiscSpec::Tbf(t) => match *t.child {
                QdiscSpec::Pfifo(f) => assert_eq!(f.limit, 7, "1:{minor:x}"),
                other => panic!("tbf child at 1:{minor:x} read as {other:?}"),
            },
            other => panic!("tbf read as {other:?}"),
        }
    }
}

/// Two qdiscs cannot hang under one tbf: on Linux the second `tc qdisc add` fails
/// ("NLM_F_REPLACE needed to override") and a `replace` takes the first one's place, so no
/// `tc qdisc show` lists two. Such a tree is refused, whatever the minors.
#[test]
fn two_children_under_one_tbf_are_refused() {
    for (a, b) in [(1u16, 2u16), (1, 1), (2, 3)] {
        let tree = vec![
            tbf_root(),
            node(TcParent::Class(1, a), 2, "pfifo", &["limit", "7"]),
            node(TcParent::Class(1, b), 3, "pfifo", &["limit", "9"]),
        ];
        let e = QdiscSpec::from_tc(&tree, &ctx()).unwrap_err();
        assert!(
            e.to_string().contains("tbf has one class"),
            "1:{a:x} + 1:{b:x}: {e}"
        );
    }
}

/// prio's classes are `:1` … `:bands` (`prio_find`: minor − 1 must be a band). On Linux a
/// child at `1:4` of a 3-band prio and at `1:` are refused; `1:3` is the last band.
#[test]
fn a_prio_child_must_sit_at_one_of_its_bands() {
    let prio = || node(TcParent::Root, 1, "prio", &[]);
    for minor in [0u16, 4, 0xffff] {
        let tree = vec![
            prio(),
            node(TcParent::Class(1, minor), 2, "pfifo", &["limit", "7"]),
        ];
        let e = QdiscSpec::from_tc(&tree, &ctx()).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("prio has no class :{minor:x}")),
            "1:{minor:x}: {e}"
        );
    }
    let tree = vec![
        prio(),
        node(TcParent::Class(1, 3), 2, "pfifo", &["limit", "7"]),
    ];
    match QdiscSpec::from_tc(&tree, &ctx()).unwrap() {
        QdiscSpec::Prio(p) => {
            assert_eq!(p.children.len(), 3);
            assert!(matches!(p.children[2], QdiscSpec::Pfifo(ref f) if f.limit == 7));
            // The other bands keep prio's default child, a pfifo of tx_queue_len (1000).
            assert!(matches!(p.children[0], QdiscSpec::Pfifo(ref f) if f.limit == 1000));
        }
        other => panic!("prio read as {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// The one-line texts.
// ---------------------------------------------------------------------------------------

/// A refusal reads "KIND: REASON" on one line (docs/deploy.md: "refused with one line
/// naming the key and the reason").
#[test]
fn a_refusal_names_the_discipline_then_the_reason() {
    let e = NotLinux::new("tbf", "peakrate below rate");
    assert_eq!(e.to_string(), "tbf: peakrate below rate");
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert_eq!(boxed.to_string(), "tbf: peakrate below rate");
    for kind in ["lstf_codel", "cocoa", "las", "srpt"] {
        let q = QdiscSpec::parse(&Value::Str(kind.into()), "q", &ctx()).unwrap();
        let msg = q.linux().unwrap_err().to_string();
        assert!(msg.starts_with(&format!("{kind}: ")), "{msg}");
        assert!(!msg.contains('\n') && msg.len() > kind.len() + 10, "{msg}");
    }
}

/// `describe` is the root's tc line: `pfifo_fast` takes no arguments, so its line is the
/// bare kind (`tc qdisc replace dev X root pfifo_fast`), without a trailing space.
#[test]
fn describe_is_the_tc_line() {
    let d = |k: &str| {
        QdiscSpec::parse(&Value::Str(k.into()), "q", &ctx())
            .unwrap()
            .describe()
    };
    assert_eq!(d("pfifo_fast"), "pfifo_fast");
    assert_eq!(d("pfifo"), "pfifo limit 1000");
    assert_eq!(
        QdiscSpec::from_tc_args("bfifo", &["limit", "1mb"], &ctx())
            .unwrap()
            .describe(),
        "bfifo limit 1Mb"
    );
}
