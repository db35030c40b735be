//! Output of benchmark rows: an aligned table for people, or one JSON object
//! a line (`--json`) for tools. Rows are printed as they are produced.
//!
//! Every JSON row ends with the machine's state when it was printed:
//! `load_1m`, the 1-minute load average (`/proc/loadavg`; `null` where
//! unknown), and `cpus`, the CPUs this process may use; figures taken on a
//! shared machine say how shared it was (`kcontrol-bench plot` prints the
//! range under each chart).

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

impl Row {
    /// The row with `fields` appended, in their order; a field the row
    /// has already takes the new value in its place (a JSON object names
    /// each key once).
    pub fn with(mut self, fields: impl IntoIterator<Item = (&'static str, Value)>) -> Self {
        for (key, value) in fields {
            match self.0.iter_mut().find(|(k, _)| *k == key) {
                Some(field) => field.1 = value,
                None => self.0.push((key, value)),
            }
        }
        self
    }

    /// The row with `load_1m` and `cpus` appended.
    fn with_machine(self) -> Self {
        let cpus = std::thread::available_parallelism().map_or(0, usize::from);
        self.with([
            ("load_1m", Value::from(load_average())),
            ("cpus", Value::from(cpus)),
        ])
    }
}

/// The machine's 1-minute load average (`/proc/loadavg`), `None` where it
/// cannot be read.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|f| f.parse().ok()))
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
                println!("{}", row.with_machine().to_json());
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_rows_keep_their_order_and_end_with_the_machine_state() {
        let line = row([("scenario", json!("x")), ("b", json!(2)), ("a", json!(1.5))])
            .with_machine()
            .to_json();
        assert!(
            line.starts_with(r#"{"scenario":"x","b":2,"a":1.5,"load_1m":"#),
            "{line}"
        );
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert!(parsed["cpus"].as_u64().unwrap() >= 1, "{line}");
        if cfg!(target_os = "linux") {
            assert!(parsed["load_1m"].as_f64().unwrap() >= 0.0, "{line}");
        }
    }

    #[test]
    fn a_field_the_row_has_is_replaced_in_place_never_repeated() {
        let line = row([("scenario", json!("x")), ("load_1m", json!(-1.0))])
            .with([("a", json!(1)), ("scenario", json!("y"))])
            .with_machine()
            .to_json();
        assert!(line.starts_with(r#"{"scenario":"y","load_1m":"#), "{line}");
        assert_eq!(line.matches("\"load_1m\"").count(), 1, "{line}");
        assert_eq!(line.matches("\"scenario\"").count(), 1, "{line}");
        assert!(line.contains(r#""a":1,"cpus":"#), "{line}");
    }
}
