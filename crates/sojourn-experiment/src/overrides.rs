//! `--set KEY=VALUE` overrides: VALUE in TOML syntax, bare words are strings; KEY a dotted
//! path (`topology.bottleneck.qdisc`, list items as `workload[1].size`) whose missing
//! tables are created. The one implementation: the Python front (`--set`, the API's
//! `overrides`, sweep files' `set` and axes) calls these through sojourn-py
//! (python/sojourn/_config.py).

use sojourn_core::params::{ConfError, Table, Value};

/// Parses `KEY=VALUE`. The error's path is the whole item.
pub fn parse_assignment(item: &str) -> Result<(String, Value), ConfError> {
    let Some((k, v)) = item.split_once('=') else {
        return Err(ConfError::new(
            item,
            "expected KEY=VALUE (VALUE in TOML syntax, bare words are strings)",
        ));
    };
    let value = match crate::toml_text::parse_toml(&format!("v = {v}")) {
        Ok(t) => t.get("v").cloned().unwrap_or(Value::Str(v.to_string())),
        Err(_) => Value::Str(v.to_string()),
    };
    Ok((k.trim().to_string(), value))
}

/// The largest list index an override may name (`workload[N]`): no experiment has that
/// many entries in one list, and padding up to a larger one would only build a huge list
/// (`workload[100000000]` used to take 3.7 GB).
pub const MAX_INDEX: usize = 9999;

/// One step of a dotted key: a table key, optionally followed by a list index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPart<'a> {
    pub name: &'a str,
    pub index: Option<usize>,
}

/// Python's `repr` of a string, so messages read the same as the rest of the front's.
fn quoted(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// Parses a dotted key (`topology.bottleneck.qdisc`, `workload[1].size`): names are
/// trimmed and non-empty, an index is decimal digits up to [`MAX_INDEX`]. Errors have the
/// key as their path.
pub fn parse_key(dotted: &str) -> Result<Vec<KeyPart<'_>>, ConfError> {
    let err = |msg: String| ConfError::new(dotted, msg);
    if dotted.trim().is_empty() {
        return Err(err(
            "expected a dotted key such as topology.bottleneck.qdisc".into(),
        ));
    }
    let mut parts = Vec::new();
    for part in dotted.trim().split('.') {
        let part = part.trim();
        if !part.contains('[') && !part.contains(']') {
            if part.is_empty() {
                return Err(err(
                    "empty key name (two dots, or a leading/trailing dot)".into()
                ));
            }
            parts.push(KeyPart {
                name: part,
                index: None,
            });
            continue;
        }
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        let Some(text) = rest.strip_suffix(']').filter(|_| !name.is_empty()) else {
            return Err(err(format!(
                "malformed list index in {}; expected NAME[N], e.g. workload[0]",
                quoted(part)
            )));
        };
        let text = text.trim();
        // Digits only: "-1", "x" and "+1" are refused.
        if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err(format!(
                "list index {} in {} is not a non-negative integer",
                quoted(text),
                quoted(part)
            )));
        }
        let i: usize = text.parse().unwrap_or(usize::MAX);
        if i > MAX_INDEX {
            let shown = text.trim_start_matches('0');
            return Err(err(format!(
                "list index {} is too large (at most {MAX_INDEX})",
                if shown.is_empty() { "0" } else { shown }
            )));
        }
        parts.push(KeyPart {
            name,
            index: Some(i),
        });
    }
    Ok(parts)
}

/// What is in the way of a dotted key, in the words of the messages.
fn kind(v: &Value) -> String {
    match v {
        Value::Bool(b) => format!("a boolean ({})", if *b { "True" } else { "False" }),
        Value::Int(i) => format!("a number ({i})"),
        Value::Float(x) => format!("a number ({x:?})"),
        Value::Str(s) => format!(
            "a string ({})",
            quoted(&s.chars().take(40).collect::<String>())
        ),
        Value::Array(_) => "a list".into(),
        Value::Table(_) => "a table".into(),
    }
}

/// Sets `dotted = value` in `table`, creating tables (and list items) on the way: an index
/// past the end appends empty tables up to it. Errors have the key as their path.
pub fn set_key(table: &mut Table, dotted: &str, value: Value) -> Result<(), ConfError> {
    let parts = parse_key(dotted)?;
    let err = |msg: String| ConfError::new(dotted, msg);
    let mut cur = table;
    let mut walked = String::new();
    let last = parts.len() - 1;
    for (n, KeyPart { name, index }) in parts.into_iter().enumerate() {
        let here = if walked.is_empty() {
            name.to_string()
        } else {
            format!("{walked}.{name}")
        };
        let pos = match cur.0.iter().position(|(k, _)| k == name) {
            Some(p) => p,
            None => {
                let fresh = if index.is_some() {
                    Value::Array(Vec::new())
                } else {
                    Value::Table(Table::default())
                };
                cur.0.push((name.to_string(), fresh));
                cur.0.len() - 1
            }
        };
        let slot = &mut cur.0[pos].1;
        let slot = match index {
            None => slot,
            Some(i) => {
                let Value::Array(items) = slot else {
                    return Err(err(format!(
                        "{here} is {}, not a list, so it has no entry [{i}]",
                        kind(slot)
                    )));
                };
                while items.len() <= i {
                    items.push(Value::Table(Table::default()));
                }
                &mut items[i]
            }
        };
        if n == last {
            *slot = value;
            return Ok(());
        }
        walked = match index {
            None => here,
            Some(i) => format!("{here}[{i}]"),
        };
        match slot {
            Value::Table(t) => cur = t,
            other => {
                return Err(err(format!(
                    "{walked} is {}, not a table, so it has no key {}",
                    kind(other),
                    // The next part's name (parse_key checked it).
                    quoted(
                        dotted
                            .trim()
                            .split('.')
                            .nth(n + 1)
                            .unwrap_or("")
                            .trim()
                            .split('[')
                            .next()
                            .unwrap_or("")
                    )
                )));
            }
        }
    }
    unreachable!("parse_key returns at least one part")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_keys_create_tables_and_list_items() {
        let mut t = crate::toml_text::parse_toml("[topology]\npairs = 2\n").unwrap();
        let (k, v) = parse_assignment("topology.bottleneck.qdisc=codel").unwrap();
        assert_eq!(v, Value::Str("codel".into()), "bare words are strings");
        set_key(&mut t, &k, v).unwrap();
        let (k, v) = parse_assignment("workload[1].count=3").unwrap();
        assert_eq!(v, Value::Int(3), "TOML syntax");
        set_key(&mut t, &k, v).unwrap();
        let topo = t.get("topology").unwrap().as_table().unwrap();
        let b = topo.get("bottleneck").unwrap().as_table().unwrap();
        assert_eq!(b.get("qdisc"), Some(&Value::Str("codel".into())));
        assert_eq!(topo.get("pairs"), Some(&Value::Int(2)), "siblings kept");
        let Some(Value::Array(w)) = t.get("workload") else {
            panic!()
        };
        assert_eq!(w.len(), 2);
        assert_eq!(w[1].as_table().unwrap().get("count"), Some(&Value::Int(3)));
        assert!(parse_assignment("novalue").is_err());
    }

    /// The messages of the bad-input catalogue (tests/python/bad_input_catalogue.py), which
    /// the Python front shows as they are.
    #[test]
    fn bad_indices_and_paths_are_errors_not_allocations() {
        let base = "duration = \"1s\"\nseed = 3\nworkload = [{}, {}]\n[topology]\nkind = \"x\"\n";
        let msg = |key: &str| {
            let mut t = crate::toml_text::parse_toml(base).unwrap();
            let e = set_key(&mut t, key, Value::Int(1)).unwrap_err();
            assert_eq!(e.path, key);
            e.msg
        };
        assert_eq!(
            msg("workload[100000000].rate"),
            "list index 100000000 is too large (at most 9999)"
        );
        assert_eq!(
            msg("workload[x].rate"),
            "list index 'x' in 'workload[x]' is not a non-negative integer"
        );
        assert_eq!(
            msg("workload[-1].rate"),
            "list index '-1' in 'workload[-1]' is not a non-negative integer"
        );
        assert_eq!(
            msg("workload[].rate"),
            "list index '' in 'workload[]' is not a non-negative integer"
        );
        assert_eq!(
            msg("workload[0.rate"),
            "malformed list index in 'workload[0'; expected NAME[N], e.g. workload[0]"
        );
        assert_eq!(
            msg("[0].rate"),
            "malformed list index in '[0]'; expected NAME[N], e.g. workload[0]"
        );
        assert_eq!(
            msg("duration.value"),
            "duration is a string ('1s'), not a table, so it has no key 'value'"
        );
        assert_eq!(
            msg("seed.x"),
            "seed is a number (3), not a table, so it has no key 'x'"
        );
        assert_eq!(
            msg("workload.rate"),
            "workload is a list, not a table, so it has no key 'rate'"
        );
        assert_eq!(
            msg("topology[0].kind"),
            "topology is a table, not a list, so it has no entry [0]"
        );
        assert_eq!(
            msg("topology.kind.x[2]"),
            "topology.kind is a string ('x'), not a table, so it has no key 'x'"
        );
        assert_eq!(
            msg("a..b"),
            "empty key name (two dots, or a leading/trailing dot)"
        );
        assert_eq!(
            msg(" "),
            "expected a dotted key such as topology.bottleneck.qdisc"
        );
        let e = parse_assignment("novalue").unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.msg.as_str()),
            (
                "novalue",
                "expected KEY=VALUE (VALUE in TOML syntax, bare words are strings)"
            )
        );
    }

    /// Within bounds an index pads with empty tables; names are trimmed.
    #[test]
    fn indices_pad_and_names_are_trimmed() {
        let mut t = Table::default();
        set_key(&mut t, " workload[ 2 ] . rate ", Value::Str("1Mbit".into())).unwrap();
        let Some(Value::Array(w)) = t.get("workload") else {
            panic!("{t:?}")
        };
        assert_eq!(w.len(), 3);
        assert_eq!(w[0], Value::Table(Table::default()));
        assert_eq!(
            w[2].as_table().unwrap().get("rate"),
            Some(&Value::Str("1Mbit".into()))
        );
        assert_eq!(
            parse_key("a.b[9999]").unwrap()[1],
            KeyPart {
                name: "b",
                index: Some(9999)
            }
        );
        // A value nested far deeper than any experiment is a bare string, not a crash.
        let deep = format!("x={}{}", "[".repeat(3000), "]".repeat(3000));
        let (k, v) = parse_assignment(&deep).unwrap();
        assert_eq!(k, "x");
        assert!(
            matches!(v, Value::Str(_) | Value::Array(_)),
            "{}",
            v.type_name()
        );
    }
}
