//! Parameters from experiment files, without any file format in the core.
//!
//! The simulator turns TOML (or a Python dict) into this small [`Value`] tree. Each
//! discipline reads its own parameters through [`Params`], next to its defaults, and
//! [`Params::finish`] rejects keys nobody read, so a typo never silently falls back to a
//! default. Errors carry the key path (`links.bottleneck.qdisc.target`).

use crate::time::Duration;
use crate::units;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

/// A configuration value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    Table(Table),
}

/// An ordered table of values (order as written in the file).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Table(pub Vec<(String, Value)>);

impl Table {
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
    pub fn insert(&mut self, key: &str, v: Value) {
        if let Some(slot) = self.0.iter_mut().find(|(k, _)| k == key) {
            slot.1 = v;
        } else {
            self.0.push((key.to_string(), v));
        }
    }
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(x) if !x.is_finite() => "a non-finite number (nan or inf)",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
    pub fn as_table(&self) -> Option<&Table> {
        match self {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }
}

/// A configuration mistake: where (`path`) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfError {
    pub path: String,
    pub msg: String,
}

impl ConfError {
    pub fn new(path: impl Into<String>, msg: impl Into<String>) -> ConfError {
        ConfError {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.msg)
        } else {
            write!(f, "{}: {}", self.path, self.msg)
        }
    }
}

impl std::error::Error for ConfError {}

pub type ConfResult<T> = Result<T, ConfError>;

/// Joins a parent path and a key.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Reads typed parameters out of a table, remembering which keys were used.
pub struct Params<'a> {
    path: String,
    table: &'a Table,
    used: BTreeSet<&'a str>,
    /// Every key the reader asked for, present or not: the keys this table accepts (on
    /// the paths the parse took), the candidates for "did you mean" hints.
    asked: RefCell<BTreeSet<String>>,
}

static EMPTY: Table = Table(Vec::new());

impl<'a> Params<'a> {
    pub fn new(path: impl Into<String>, table: &'a Table) -> Params<'a> {
        Params {
            path: path.into(),
            table,
            used: BTreeSet::new(),
            asked: RefCell::new(BTreeSet::new()),
        }
    }

    /// Parameters of an empty table (all defaults).
    pub fn empty(path: impl Into<String>) -> Params<'static> {
        Params {
            path: path.into(),
            table: &EMPTY,
            used: BTreeSet::new(),
            asked: RefCell::new(BTreeSet::new()),
        }
    }

    /// A value given as a table, or as a bare string `"kind"` (then only `kind` is set).
    pub fn path(&self) -> &str {
        &self.path
    }

    pub fn key_path(&self, key: &str) -> String {
        join(&self.path, key)
    }

    pub fn err(&self, key: &str, msg: impl Into<String>) -> ConfError {
        ConfError::new(self.key_path(key), msg)
    }

    pub fn has(&self, key: &str) -> bool {
        self.ask(key);
        self.table.get(key).is_some()
    }

    fn ask(&self, key: &str) {
        let mut asked = self.asked.borrow_mut();
        if !asked.contains(key) {
            asked.insert(key.to_string());
        }
    }

    /// Declares keys this table accepts although this reader did not ask for them (read
    /// elsewhere, or only under another `kind`), so typos of them get a hint.
    pub fn accepts(&mut self, keys: &[&str]) {
        self.asked
            .borrow_mut()
            .extend(keys.iter().map(|k| k.to_string()));
    }

    /// The raw value, marking the key used.
    pub fn raw(&mut self, key: &str) -> Option<&'a Value> {
        self.ask(key);
        let table: &'a Table = self.table;
        let (k, v) = table.0.iter().find(|(k, _)| k == key)?;
        self.used.insert(k.as_str());
        Some(v)
    }

    /// Every key not read yet and its value, in the table's order, marking them read: for
    /// a reader that hands a table's remaining keys on as they are (a Python discipline's
    /// own parameters go to its constructor, qdisc/external.rs).
    pub fn rest(&mut self) -> Vec<(&'a str, &'a Value)> {
        let table: &'a Table = self.table;
        let rest: Vec<(&'a str, &'a Value)> = table
            .0
            .iter()
            .filter(|(k, _)| !self.used.contains(k.as_str()))
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        for (k, _) in &rest {
            self.used.insert(k);
        }
        rest
    }

    pub fn str_opt(&mut self, key: &str) -> ConfResult<Option<&'a str>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.err(key, format!("expected a string, got {}", v.type_name()))),
        }
    }

    /// One of `choices`, or `default`.
    pub fn choice(
        &mut self,
        key: &str,
        choices: &[&'static str],
        default: &'static str,
    ) -> ConfResult<&'static str> {
        match self.str_opt(key)? {
            None => Ok(default),
            Some(s) => choices.iter().find(|c| **c == s).copied().ok_or_else(|| {
                self.err(
                    key,
                    format!(
                        "unknown value {s:?}; expected one of {}",
                        choices.join(", ")
                    ),
                )
            }),
        }
    }

    pub fn bool(&mut self, key: &str, default: bool) -> ConfResult<bool> {
        match self.raw(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.err(
                key,
                format!("expected true or false, got {}", v.type_name()),
            )),
        }
    }

    pub fn f64(&mut self, key: &str, default: f64) -> ConfResult<f64> {
        match self.raw(key) {
            None => Ok(default),
            Some(Value::Float(x)) if x.is_finite() => Ok(*x),
            Some(Value::Float(x)) => {
                Err(self.err(key, format!("expected a finite number, got {x}")))
            }
            Some(Value::Int(i)) => Ok(*i as f64),
            Some(v) => Err(self.err(key, format!("expected a number, got {}", v.type_name()))),
        }
    }

    /// A number within `[lo, hi]`.
    pub fn f64_in(&mut self, key: &str, default: f64, lo: f64, hi: f64) -> ConfResult<f64> {
        let x = self.f64(key, default)?;
        if x < lo || x > hi {
            return Err(self.err(key, format!("{x} is out of range [{lo}, {hi}]")));
        }
        Ok(x)
    }

    /// An integer within `[lo, hi]`.
    pub fn int(&mut self, key: &str, default: i64, lo: i64, hi: i64) -> ConfResult<i64> {
        let x = match self.raw(key) {
            None => default,
            Some(Value::Int(i)) => *i,
            Some(Value::Float(f)) if f.fract() == 0.0 && f.is_finite() => *f as i64,
            Some(Value::Float(f)) if !f.is_finite() => {
                return Err(self.err(key, format!("expected a finite integer, got {f}")))
            }
            Some(v) => {
                return Err(self.err(key, format!("expected an integer, got {}", v.type_name())))
            }
        };
        if x < lo || x > hi {
            return Err(self.err(key, format!("{x} is out of range [{lo}, {hi}]")));
        }
        Ok(x)
    }

    pub fn u32(&mut self, key: &str, default: u32, lo: u32, hi: u32) -> ConfResult<u32> {
        Ok(self.int(key, default as i64, lo as i64, hi as i64)? as u32)
    }

    pub fn u64(&mut self, key: &str, default: u64, lo: u64, hi: u64) -> ConfResult<u64> {
        let hi = hi.min(i64::MAX as u64);
        Ok(self.int(key, default as i64, lo as i64, hi as i64)? as u64)
    }

    pub fn duration_opt(&mut self, key: &str) -> ConfResult<Option<Duration>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Str(s)) => units::parse_duration(s)
                .map(Some)
                .map_err(|m| self.err(key, m)),
            Some(Value::Int(0)) => Ok(Some(Duration::ZERO)),
            Some(v) => Err(self.err(
                key,
                format!(
                    "expected a duration string like \"100ms\", got {}",
                    v.type_name()
                ),
            )),
        }
    }

    pub fn duration(&mut self, key: &str, default: Duration) -> ConfResult<Duration> {
        Ok(self.duration_opt(key)?.unwrap_or(default))
    }

    /// A rate in bit/s (`"10Mbit"`).
    pub fn rate_opt(&mut self, key: &str) -> ConfResult<Option<u64>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Str(s)) => units::parse_rate(s).map(Some).map_err(|m| self.err(key, m)),
            Some(Value::Int(0)) => Ok(Some(0)),
            Some(v) => Err(self.err(
                key,
                format!(
                    "expected a rate string like \"10Mbit\", got {}",
                    v.type_name()
                ),
            )),
        }
    }

    /// A size in bytes: a string with a unit (`"1.5KiB"`) or a plain integer of bytes.
    pub fn bytes_opt(&mut self, key: &str) -> ConfResult<Option<u64>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Str(s)) => units::parse_bytes(s)
                .map(Some)
                .map_err(|m| self.err(key, m)),
            Some(Value::Int(i)) if *i >= 0 => Ok(Some(*i as u64)),
            Some(Value::Int(i)) => Err(self.err(key, format!("a size cannot be negative ({i})"))),
            Some(v) => Err(self.err(
                key,
                format!(
                    "expected a size like \"1500B\" or \"300KiB\", got {}",
                    v.type_name()
                ),
            )),
        }
    }

    pub fn bytes(&mut self, key: &str, default: u64) -> ConfResult<u64> {
        Ok(self.bytes_opt(key)?.unwrap_or(default))
    }

    /// A nested table (or `None`).
    pub fn table_opt(&mut self, key: &str) -> ConfResult<Option<&'a Table>> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(t)),
            Some(v) => Err(self.err(key, format!("expected a table, got {}", v.type_name()))),
        }
    }

    /// Nested parameters (an absent key gives an empty table).
    pub fn child(&mut self, key: &str) -> ConfResult<Params<'a>> {
        let p = self.key_path(key);
        Ok(match self.table_opt(key)? {
            Some(t) => Params::new(p, t),
            None => Params {
                path: p,
                table: &EMPTY,
                used: BTreeSet::new(),
                asked: RefCell::new(BTreeSet::new()),
            },
        })
    }

    /// Rejects every key that was not read: `unknown key "tagret" (did you mean "target"?)`.
    pub fn finish(self) -> ConfResult<()> {
        let asked = self.asked.borrow();
        let known: Vec<&str> = asked.iter().map(|k| k.as_str()).collect();
        for k in self.table.keys() {
            if !self.used.contains(k) {
                let hint = closest(k, &known)
                    .map(|c| format!(" (did you mean {c:?}?)"))
                    .unwrap_or_default();
                return Err(ConfError::new(
                    join(&self.path, k),
                    format!("unknown key{hint}"),
                ));
            }
        }
        Ok(())
    }

    /// Like `finish`, but lists the accepted keys in the message.
    pub fn finish_with(self, accepted: &[&str]) -> ConfResult<()> {
        for k in self.table.keys() {
            if !self.used.contains(k) {
                let mut all: Vec<&str> = accepted.to_vec();
                let asked = self.asked.borrow();
                all.extend(asked.iter().map(|k| k.as_str()));
                let hint = closest(k, &all)
                    .map(|c| format!(" (did you mean {c:?}?)"))
                    .unwrap_or_default();
                return Err(ConfError::new(
                    join(&self.path, k),
                    format!("unknown key{hint}; accepted keys: {}", accepted.join(", ")),
                ));
            }
        }
        Ok(())
    }
}

/// The closest candidate within edit distance 2, for "did you mean" hints; a word other
/// tools use for a key (`bandwidth` or `bw` for a link's `rate`, tc's `latency` for
/// `delay`), or a misspelling of one, names that key when the table accepts it.
pub fn closest<'b>(word: &str, candidates: &[&'b str]) -> Option<&'b str> {
    const SYNONYMS: [(&str, &str); 4] = [
        ("bandwidth", "rate"),
        ("bw", "rate"),
        ("speed", "rate"),
        ("latency", "delay"),
    ];
    candidates
        .iter()
        .map(|c| (levenshtein(word, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
        .or_else(|| {
            let lower = word.to_ascii_lowercase();
            SYNONYMS
                .iter()
                .filter(|(w, _)| levenshtein(&lower, w) <= 2.min(w.len() / 3))
                .find_map(|(_, key)| candidates.iter().find(|c| *c == key).copied())
        })
}

fn levenshtein(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(pairs: &[(&str, Value)]) -> Table {
        Table(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn hints_name_the_key_other_tools_call_bandwidth_or_latency() {
        let link = ["rate", "delay", "qdisc"];
        assert_eq!(closest("bandwith", &link), Some("rate"));
        assert_eq!(closest("Bandwidth", &link), Some("rate"));
        assert_eq!(closest("latency", &link), Some("delay"));
        assert_eq!(closest("bw", &link), Some("rate"));
        // Only when the table has that key, and a near spelling wins over a synonym.
        assert_eq!(closest("bandwidth", &["delay"]), None);
        assert_eq!(
            closest("bandwith", &["bandwidth", "rate"]),
            Some("bandwidth")
        );
        assert_eq!(closest("bx", &link), None);
    }

    #[test]
    fn reads_typed_values_and_rejects_unknown_keys() {
        let tab = t(&[
            ("target", Value::Str("5ms".into())),
            ("tagret", Value::Int(1)),
        ]);
        let mut p = Params::new("links.bottleneck.qdisc", &tab);
        assert_eq!(
            p.duration("target", Duration::ZERO).unwrap(),
            Duration::from_ms(5)
        );
        let e = p.finish().unwrap_err();
        assert_eq!(e.path, "links.bottleneck.qdisc.tagret");
        assert!(e.msg.contains("did you mean \"target\""), "{}", e.msg);
    }

    /// The hint comes from the keys the table accepts, not only from keys present (issue
    /// #17: `tagret` alone got no hint).
    #[test]
    fn did_you_mean_from_accepted_keys_alone() {
        let tab = t(&[("tagret", Value::Str("5ms".into()))]);
        let mut p = Params::new("q", &tab);
        p.duration("target", Duration::from_ms(5)).unwrap();
        p.duration("interval", Duration::from_ms(100)).unwrap();
        let e = p.finish().unwrap_err();
        assert_eq!(
            e.to_string(),
            "q.tagret: unknown key (did you mean \"target\"?)"
        );
        let tab = t(&[("los", Value::Float(0.1))]);
        let p = Params::new("l", &tab);
        assert!(!p.has("loss"));
        let e = p.finish().unwrap_err();
        assert!(e.msg.contains("did you mean \"loss\""), "{}", e.msg);
    }

    #[test]
    fn non_finite_numbers_say_finite() {
        let tab = t(&[
            ("a", Value::Float(f64::NAN)),
            ("b", Value::Float(f64::INFINITY)),
        ]);
        let mut p = Params::new("q", &tab);
        assert_eq!(
            p.f64("a", 0.0).unwrap_err().msg,
            "expected a finite number, got NaN"
        );
        assert!(p.int("b", 0, 0, 5).unwrap_err().msg.contains("finite"));
    }

    #[test]
    fn range_and_type_errors_name_the_key() {
        let tab = t(&[("limit", Value::Int(-1)), ("ecn", Value::Str("yes".into()))]);
        let mut p = Params::new("q", &tab);
        let e = p.u32("limit", 1000, 1, u32::MAX).unwrap_err();
        assert_eq!(e.to_string(), "q.limit: -1 is out of range [1, 4294967295]");
        let e = p.bool("ecn", false).unwrap_err();
        assert_eq!(e.to_string(), "q.ecn: expected true or false, got a string");
    }
}
