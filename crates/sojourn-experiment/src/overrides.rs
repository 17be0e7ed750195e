//! `--set KEY=VALUE` overrides, with the meaning the Python front gives them
//! (python/sojourn/cli.py, python/sojourn/_config.py): VALUE in TOML syntax, bare words
//! are strings; KEY a dotted path (`topology.bottleneck.qdisc`, list items as
//! `workload[1].size`) whose missing tables are created.

use sojourn_core::params::{ConfError, Table, Value};

/// Parses `KEY=VALUE`.
pub fn parse_assignment(item: &str) -> Result<(String, Value), ConfError> {
    let Some((k, v)) = item.split_once('=') else {
        return Err(ConfError::new(
            "--set",
            format!("{item}: expected KEY=VALUE (VALUE in TOML syntax, bare words are strings)"),
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
/// (`workload[100000000]` used to take 3.7 GB). Same bound as `_config.MAX_INDEX`.
pub const MAX_INDEX: usize = 9999;

/// Sets `dotted = value` in `table`, creating tables (and list items) on the way.
pub fn set_key(table: &mut Table, dotted: &str, value: Value) -> Result<(), ConfError> {
    let parts: Vec<&str> = dotted.split('.').collect();
    set_in(table, &parts, value, dotted)
}

fn set_in(table: &mut Table, parts: &[&str], value: Value, dotted: &str) -> Result<(), ConfError> {
    let (part, rest) = (parts[0], &parts[1..]);
    let (name, index) = match part.strip_suffix(']').and_then(|p| p.split_once('[')) {
        Some((n, i)) => {
            // Digits only: "-1", "x" and "+1" are refused (as in _config.py).
            let i: usize = match i.trim() {
                t if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => {
                    t.parse().unwrap_or(usize::MAX)
                }
                _ => {
                    return Err(ConfError::new(
                        dotted,
                        format!("list index {i:?} in {part:?} is not a non-negative integer"),
                    ))
                }
            };
            if i > MAX_INDEX {
                return Err(ConfError::new(
                    dotted,
                    format!("list index {i} is too large (at most {MAX_INDEX})"),
                ));
            }
            (n, Some(i))
        }
        None if part.contains('[') || part.contains(']') => {
            return Err(ConfError::new(
                dotted,
                format!("malformed list index in {part:?}; expected NAME[N], e.g. workload[0]"),
            ))
        }
        None if part.trim().is_empty() => {
            return Err(ConfError::new(
                dotted,
                "empty key name (two dots, or a leading/trailing dot)",
            ))
        }
        None => (part, None),
    };
    let not_table = |what: &Value| {
        ConfError::new(
            dotted,
            format!(
                "cannot set a key inside {name:?}: it is {}",
                what.type_name()
            ),
        )
    };
    let slot: &mut Value = match table.0.iter().position(|(k, _)| k == name) {
        Some(i) => &mut table.0[i].1,
        None => {
            let fresh = if index.is_some() {
                Value::Array(Vec::new())
            } else {
                Value::Table(Table::default())
            };
            table.0.push((name.to_string(), fresh));
            &mut table.0.last_mut().expect("just pushed").1
        }
    };
    let slot = match index {
        None => slot,
        Some(i) => {
            let Value::Array(items) = slot else {
                return Err(not_table(slot));
            };
            while items.len() <= i {
                items.push(Value::Table(Table::default()));
            }
            &mut items[i]
        }
    };
    if rest.is_empty() {
        *slot = value;
        return Ok(());
    }
    if !matches!(slot, Value::Table(_)) {
        // Python's setdefault replaces nothing: a scalar in the way is an error there too.
        return Err(not_table(slot));
    }
    let Value::Table(t) = slot else {
        unreachable!()
    };
    set_in(t, rest, value, dotted)
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

    #[test]
    fn bad_indices_and_paths_are_errors_not_allocations() {
        let mut t = crate::toml_text::parse_toml("duration = \"1s\"\n").unwrap();
        let e = set_key(&mut t, "workload[100000000].rate", Value::Int(1)).unwrap_err();
        assert!(e.msg.contains("too large"), "{}", e.msg);
        let e = set_key(&mut t, "workload[x].rate", Value::Int(1)).unwrap_err();
        assert!(e.msg.contains("not a non-negative integer"), "{}", e.msg);
        let e = set_key(&mut t, "workload[-1].rate", Value::Int(1)).unwrap_err();
        assert!(e.msg.contains("not a non-negative integer"), "{}", e.msg);
        let e = set_key(&mut t, "duration.value", Value::Int(1)).unwrap_err();
        assert!(e.msg.contains("it is a string"), "{}", e.msg);
        let e = set_key(&mut t, "a..b", Value::Int(1)).unwrap_err();
        assert!(e.msg.contains("empty key name"), "{}", e.msg);
    }
}
