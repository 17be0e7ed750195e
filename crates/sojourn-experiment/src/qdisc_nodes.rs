//! Node names in a discipline's address filters (`htb`/`drr` `filters = [{ dst = "sub3",
//! classid = "1:13" }]`). The discipline reads a node by its id (the simulator's address of
//! node `n` has `n` in its low 32 bits); only the experiment knows the names, and a
//! dumbbell adds its hosts after its bottleneck link. So a link's spec is first parsed with
//! every name standing for a node no experiment has ([`with_placeholders`]), which checks
//! everything else at once, and parsed again with the real ids once all nodes exist
//! ([`resolve`]).

use sojourn_core::params::{join, ConfResult, Table, Value};
use std::borrow::Cow;

/// The id a name stands for before the nodes are known (no experiment has 2^32 − 1 nodes).
const PLACEHOLDER: i64 = u32::MAX as i64;

/// A `src`/`dst` value of a filter that names a node (a string that is no IP address).
fn node_name(v: &Value) -> Option<&str> {
    match v {
        Value::Str(s) if s.parse::<std::net::IpAddr>().is_err() => Some(s),
        _ => None,
    }
}

/// Rewrites every filter's node name under `v` with `f(name, path)`; `None` if there is
/// none (the common case: no copy).
pub(crate) fn rewrite(
    v: &Value,
    path: &str,
    f: &mut dyn FnMut(&str, &str) -> ConfResult<i64>,
) -> ConfResult<Option<Value>> {
    match v {
        Value::Table(t) => {
            let mut out: Option<Table> = None;
            for (i, (k, x)) in t.0.iter().enumerate() {
                let kp = join(path, k);
                let new = if k == "filters" {
                    rewrite_filters(x, &kp, f)?
                } else {
                    rewrite(x, &kp, f)?
                };
                if let Some(n) = new {
                    out.get_or_insert_with(|| t.clone()).0[i].1 = n;
                }
            }
            Ok(out.map(Value::Table))
        }
        Value::Array(a) => {
            let mut out: Option<Vec<Value>> = None;
            for (i, x) in a.iter().enumerate() {
                if let Some(n) = rewrite(x, &format!("{path}[{i}]"), f)? {
                    out.get_or_insert_with(|| a.clone())[i] = n;
                }
            }
            Ok(out.map(Value::Array))
        }
        _ => Ok(None),
    }
}

fn rewrite_filters(
    v: &Value,
    path: &str,
    f: &mut dyn FnMut(&str, &str) -> ConfResult<i64>,
) -> ConfResult<Option<Value>> {
    let Value::Array(items) = v else {
        return Ok(None);
    };
    let mut out: Option<Vec<Value>> = None;
    for (i, item) in items.iter().enumerate() {
        let Value::Table(t) = item else { continue };
        for key in ["src", "dst"] {
            if let Some(name) = t.get(key).and_then(node_name) {
                let id = f(name, &join(&format!("{path}[{i}]"), key))?;
                let row = out.get_or_insert_with(|| items.clone());
                if let Value::Table(rt) = &mut row[i] {
                    rt.insert(key, Value::Int(id));
                }
            }
        }
    }
    Ok(out.map(Value::Array))
}

/// `v` with every filter node name standing for a node that does not exist.
pub fn with_placeholders(v: &Value) -> Cow<'_, Value> {
    match rewrite(v, "", &mut |_, _| Ok(PLACEHOLDER)) {
        Ok(Some(n)) => Cow::Owned(n),
        _ => Cow::Borrowed(v),
    }
}

/// The raw value at a dotted key path (`topology.links[2].qdisc`) of the file.
pub(crate) fn at_path<'a>(root: &'a Table, path: &str) -> Option<&'a Value> {
    let mut cur: Option<&Value> = None;
    let mut table = root;
    for seg in path.split('.') {
        let (key, idx) = match seg.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (seg, None),
        };
        let mut v = table.get(key)?;
        if let Some(i) = idx {
            match v {
                Value::Array(a) => v = a.get(i)?,
                _ => return None,
            }
        }
        cur = Some(v);
        if let Value::Table(t) = v {
            table = t;
        }
    }
    cur
}

#[cfg(test)]
mod tests {
    use crate::load::from_toml;
    use sojourn_core::qdisc::htb::AddrMatch;
    use sojourn_core::qdisc::QdiscSpec;
    use std::path::Path;

    const FILE: &str = r#"
duration = "1s"
[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "100Mbit", qdisc = { kind = "htb", classes = [
  { classid = "1:10", rate = "10Mbit" }, { classid = "1:20", rate = "10Mbit" } ],
  filters = [ { src = "s1", classid = "1:20" }, { dst = "10.0.0.7", classid = "1:10" } ] } }
[[workload]]
kind = "bulk"
pair = 1
"#;

    #[test]
    fn names_of_nodes_added_after_the_link_resolve_to_their_ids() {
        let exp = from_toml(FILE, Path::new(".")).unwrap();
        let link = &exp.links[exp.link("bottleneck").unwrap() as usize];
        let QdiscSpec::Htb(h) = &link.qdisc else {
            panic!("{:?}", link.qdisc)
        };
        // The dumbbell adds left, right, then s0, d0, s1: s1 is node 4.
        assert_eq!(exp.node("s1"), Some(4));
        assert_eq!(h.filters[0].addr, AddrMatch::Node(4));
        assert!(matches!(h.filters[1].addr, AddrMatch::Ip(_)));
    }

    #[test]
    fn an_unknown_name_is_an_error_at_its_key() {
        let e = from_toml(&FILE.replace("\"s1\"", "\"s9\""), Path::new(".")).unwrap_err();
        assert_eq!(e.path, "topology.bottleneck.qdisc.filters[0].src");
        assert!(e.msg.starts_with("no node named \"s9\""), "{}", e.msg);
    }
}
