//! TOML text to the core's configuration [`Value`] tree.

use sojourn_core::params::{ConfError, Table, Value};

/// Parses TOML text; syntax errors carry line and column.
pub fn parse_toml(text: &str) -> Result<Table, ConfError> {
    let v: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let msg = e.message().to_string();
        let loc = e.span().map(|s| {
            let line = text[..s.start].matches('\n').count() + 1;
            let col = s.start - text[..s.start].rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            format!("line {line}, column {col}: ")
        });
        ConfError::new(
            "",
            format!("TOML syntax error at {}{msg}", loc.unwrap_or_default()),
        )
    })?;
    Ok(convert_table(&v))
}

fn convert_table(t: &toml::Table) -> Table {
    Table(t.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
}

fn convert(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::Str(s.clone()),
        toml::Value::Integer(i) => Value::Int(*i),
        toml::Value::Float(f) => Value::Float(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::Str(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(convert).collect()),
        toml::Value::Table(t) => Value::Table(convert_table(t)),
    }
}
