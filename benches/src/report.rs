//! Output of benchmark rows: an aligned table for people, or one JSON object
//! a line (`--json`) for tools. Rows are printed as they are produced.

use serde_json::Value;

/// One result row: named values in print order, `scenario` first.
pub struct Row(Vec<(&'static str, Value)>);

impl Row {
    /// Renders the row as one compact JSON object, keeping field order.
    pub fn to_json(&self) -> String {
        let fields: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{}:{}", Value::from(*k), v))
            .collect();
        format!("{{{}}}", fields.join(","))
    }
}

/// Collects and prints benchmark result rows.
pub struct Report {
    json: bool,
    last_columns: Vec<String>,
}

impl Report {
    /// A report printing JSON lines when `json` is set, else a table.
    pub fn new(json: bool) -> Self {
        Self {
            json,
            last_columns: Vec::new(),
        }
    }

    /// Prints one result row. Consecutive rows with the same fields share a
    /// table header.
    pub fn row(&mut self, row: Row) {
        if self.json {
            #[allow(clippy::print_stdout)]
            {
                println!("{}", row.to_json());
            }
            return;
        }
        let columns: Vec<String> = row.0.iter().map(|(k, _)| (*k).to_owned()).collect();
        if columns != self.last_columns {
            print_line(&columns.iter().map(String::as_str).collect::<Vec<_>>());
            self.last_columns = columns;
        }
        let cells: Vec<String> = row.0.iter().map(|(_, v)| format_value(v)).collect();
        print_line(&cells.iter().map(String::as_str).collect::<Vec<_>>());
    }
}

/// A row built from `(name, value)` pairs, keeping their order; the first
/// pair should be `("scenario", ...)`.
pub fn row<const N: usize>(fields: [(&'static str, Value); N]) -> Row {
    Row(fields.into_iter().collect())
}

fn format_value(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format_float(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn format_float(f: f64) -> String {
    if f.abs() >= 1000.0 {
        format!("{f:.0}")
    } else if f.abs() >= 1.0 {
        format!("{f:.2}")
    } else {
        format!("{f:.4}")
    }
}

#[allow(clippy::print_stdout)]
fn print_line(cells: &[&str]) {
    let line: Vec<String> = cells.iter().map(|c| format!("{c:>22}")).collect();
    println!("{}", line.join(" "));
}
