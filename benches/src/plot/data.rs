//! Reading benchmark results: the JSON lines the scenarios print with
//! `--json`, one object a line, each with a `scenario` string. Blank lines
//! are skipped; anything else that is not such an object is an error
//! naming the file and the line.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::PlotError;

/// One result row and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The name of the file it was read from (no directories, so that
    /// charts do not depend on where the results live), or a peer's label.
    pub source: String,
    /// Its line in the file (1 for the first; 0 for a peer's row).
    pub line: usize,
    /// Whether it is a peer's figure (from [`super::peers`]), not a run of
    /// the harness.
    pub peer: bool,
    fields: Map<String, Value>,
}

impl Row {
    /// A row of `fields` read from line `line` of `source`.
    pub fn new(source: impl Into<String>, line: usize, fields: Map<String, Value>) -> Self {
        Self {
            source: source.into(),
            line,
            peer: false,
            fields,
        }
    }

    /// A peer's row (see [`super::peers`]).
    pub fn peer(label: &str, fields: Map<String, Value>) -> Self {
        Self {
            source: label.to_owned(),
            line: 0,
            peer: true,
            fields,
        }
    }

    /// The row's `scenario`.
    pub fn scenario(&self) -> &str {
        self.text("scenario").unwrap_or_default()
    }

    /// A string field.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.fields.get(name).and_then(Value::as_str)
    }

    /// A number field (`None` when absent, not a number or not finite).
    pub fn num(&self, name: &str) -> Option<f64> {
        self.fields
            .get(name)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite())
    }

    /// A boolean field.
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.fields.get(name).and_then(Value::as_bool)
    }

    /// Any field.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.get(name)
    }

    /// The row when its `field` is the string `value`: for series that
    /// read one kind of row, `|r| r.when("scenario", "sync-list")?.num(..)`.
    pub fn when(&self, field: &str, value: &str) -> Option<&Self> {
        (self.text(field) == Some(value)).then_some(self)
    }
}

/// The rows of one file's text; `name` is used in errors and as each
/// row's source.
pub fn parse(name: &str, text: &str) -> Result<Vec<Row>, PlotError> {
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| PlotError::Parse {
            file: name.to_owned(),
            line: index + 1,
            reason,
        };
        let value: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let Value::Object(fields) = value else {
            return Err(bad("not a JSON object".to_owned()));
        };
        if !fields.get("scenario").is_some_and(Value::is_string) {
            return Err(bad("no \"scenario\" string".to_owned()));
        }
        rows.push(Row::new(name, index + 1, fields));
    }
    Ok(rows)
}

/// The rows of `files`, in order.
pub fn read_files(files: &[PathBuf]) -> Result<Vec<Row>, PlotError> {
    let mut rows = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read {
            path: path.clone(),
            source,
        })?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        rows.extend(parse(&name, &text)?);
    }
    Ok(rows)
}

/// Every `*.jsonl` file in `dir`, sorted by name.
pub fn result_files(dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let read = |source| PlotError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let path = entry.map_err(read)?.path();
        if path.extension().is_some_and(|e| e == "jsonl") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_their_fields_and_blank_lines_are_skipped() {
        let text = "{\"scenario\":\"single\",\"items_per_sec\":3.5e6,\"ok\":true}\n\n  \n\
                    {\"scenario\":\"sync-list\",\"cached_type\":\"ConfigMap\"}\n";
        let rows = parse("queue.jsonl", text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].scenario(), "single");
        assert_eq!(rows[0].num("items_per_sec"), Some(3.5e6));
        assert_eq!(rows[0].flag("ok"), Some(true));
        assert_eq!(rows[0].source, "queue.jsonl");
        assert_eq!((rows[0].line, rows[1].line), (1, 4));
        assert!(!rows[0].peer);
        assert_eq!(rows[1].text("cached_type"), Some("ConfigMap"));
        assert!(rows[1].when("scenario", "sync-list").is_some());
        assert!(rows[1].when("scenario", "sync-watchlist").is_none());
        assert_eq!(rows[1].num("cached_type"), None);
        assert_eq!(rows[1].num("absent"), None);
    }

    #[test]
    fn a_bad_line_is_an_error_naming_the_file_and_the_line() {
        let cases = [
            (
                "{\"scenario\":\"a\"}\n{\"scenario\":\"b\",\n",
                2,
                "not JSON",
            ),
            ("\n\n[1,2]\n", 3, "not a JSON object"),
            (
                "{\"scenario\":\"a\"}\n{\"items\":3}\n",
                2,
                "no \"scenario\" string",
            ),
            ("{\"scenario\":7}\n", 1, "no \"scenario\" string"),
            ("controller 1000: writes by kind\n", 1, "not JSON"),
        ];
        for (text, line, reason) in cases {
            let err = parse("results/x.jsonl", text).unwrap_err();
            let PlotError::Parse {
                file,
                line: at,
                reason: why,
            } = &err
            else {
                panic!("{err:?}");
            };
            assert_eq!((file.as_str(), *at), ("results/x.jsonl", line), "{text:?}");
            assert!(why.starts_with(reason), "{why}");
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!("results/x.jsonl:{line}: {reason}")),
                "{shown}"
            );
        }
    }

    #[test]
    fn files_are_read_in_name_order_and_name_their_rows() {
        let dir = std::env::temp_dir().join(format!("kcontrol-plot-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.jsonl"), "{\"scenario\":\"b\"}\n").unwrap();
        std::fs::write(dir.join("a.jsonl"), "{\"scenario\":\"a\"}\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not rows").unwrap();
        let files = result_files(&dir).unwrap();
        let rows = read_files(&files).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let seen: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.source.as_str(), r.scenario()))
            .collect();
        assert_eq!(seen, [("a.jsonl", "a"), ("b.jsonl", "b")]);
        let missing = result_files(&dir).unwrap_err();
        assert!(
            missing.to_string().contains(&dir.display().to_string()),
            "{missing}"
        );
    }
}
