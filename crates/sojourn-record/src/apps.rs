//! summary.json's `apps` entries: one application workload entry's numbers
//! ([`AppSummary`]) as the object every engine writes (docs/tests.md "Where the numbers go").

use serde_json::{json, Map, Value as J};
use sojourn_experiment::apps::{AppSummary, Number};

/// The `apps` entry of workload `workload`'s entry of kind `kind` between node names `server`
/// and `client`: those four keys, the top-level section's numbers, and one object per named
/// section (`rpm`'s `downlink` and `uplink`). A count is a JSON integer, a measurement a
/// number or `null` (not measured).
pub fn app_entry(workload: u32, kind: &str, server: &str, client: &str, s: AppSummary) -> J {
    let mut o = Map::new();
    o.insert("workload".into(), json!(workload));
    o.insert("kind".into(), json!(kind));
    o.insert("server".into(), json!(server));
    o.insert("client".into(), json!(client));
    for (section, values) in s.sections {
        let mut m = Map::new();
        for (k, v) in values {
            let v = match v {
                Number::Count(n) => json!(n),
                Number::Real(x) => x.map_or(J::Null, |x| json!(x)),
            };
            m.insert(k.into(), v);
        }
        if section.is_empty() {
            o.extend(m);
        } else {
            o.insert(section.into(), J::Object(m));
        }
    }
    J::Object(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_nest_and_unmeasured_numbers_are_null() {
        let s = AppSummary {
            sections: vec![
                ("", vec![("pages", Number::Count(3))]),
                (
                    "downlink",
                    vec![
                        ("rpm", Number::Real(Some(429.0))),
                        ("tm_tls_f_ms", Number::Real(None)),
                    ],
                ),
            ],
        };
        let j = app_entry(2, "rpm", "s0", "d0", s);
        assert_eq!(
            j.to_string(),
            r#"{"client":"d0","downlink":{"rpm":429.0,"tm_tls_f_ms":null},"kind":"rpm","pages":3,"server":"s0","workload":2}"#
        );
    }
}
