//! What commands print: a [`Doc`] of JSON records plus its human rendering, written in the
//! format of `-o` ([`Doc::render`]), and the aligned columns of human tables ([`Table`]).

use std::io::Write;

use serde_json::Value;

use crate::args::Format;

/// A command's result: JSON records for scripts, text for people.
///
/// `-o json` prints one document (the record itself when the result is one value, else an
/// array of the records); `-o jsonl` prints one record per line; `-o table` prints `human`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Doc {
    records: Vec<Value>,
    single: bool,
    human: String,
    /// What `-o json` prints instead of the records (a report with its lines as a field).
    document: Option<Value>,
}

impl Doc {
    /// A result that is one value (an object, a summary).
    pub fn one(value: Value, human: impl Into<String>) -> Self {
        Self {
            records: vec![value],
            single: true,
            human: human.into(),
            document: None,
        }
    }

    /// A result that is a list of records (possibly empty).
    pub fn many(records: Vec<Value>, human: impl Into<String>) -> Self {
        Self {
            records,
            single: false,
            human: human.into(),
            document: None,
        }
    }

    /// A result printed as `document` by `-o json`, as one line per record by `-o jsonl`
    /// (a report and its violations).
    pub fn report(document: Value, records: Vec<Value>, human: impl Into<String>) -> Self {
        Self {
            records,
            single: false,
            human: human.into(),
            document: Some(document),
        }
    }

    /// Nothing to print, in any format (a command whose output went elsewhere).
    pub fn empty() -> Self {
        Self {
            single: true,
            ..Self::default()
        }
    }

    /// The records.
    #[cfg(test)]
    pub fn records(&self) -> &[Value] {
        &self.records
    }

    /// The text to print in `format`, ending in a newline unless empty.
    pub fn render(&self, format: Format) -> String {
        let mut out = match format {
            Format::Table => self.human.clone(),
            Format::Json => {
                if let Some(d) = &self.document {
                    pretty(d)
                } else if self.single && self.records.len() == 1 {
                    pretty(&self.records[0])
                } else if self.single && self.records.is_empty() {
                    String::new()
                } else {
                    pretty(&Value::Array(self.records.clone()))
                }
            }
            Format::Jsonl => self
                .records
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out
    }

    /// Writes the rendering to stdout. A closed pipe (`dynatree ls | head -1`) is not an error.
    pub fn print(&self, format: Format) -> std::io::Result<()> {
        write_stdout(&self.render(format))
    }
}

/// Writes `text` to stdout, ignoring a closed pipe.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Column alignment in a [`Table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// Aligned columns, with an optional header line.
///
/// # Examples
///
/// ```ignore
/// let mut t = Table::new(&[("NAME", Align::Left), ("SIZE", Align::Right)]);
/// t.row(["a", "10"]);
/// assert_eq!(t.render(), "NAME  SIZE\na       10\n");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    header: Option<Vec<String>>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles and alignments.
    pub fn new(columns: &[(&str, Align)]) -> Self {
        Self {
            header: Some(columns.iter().map(|(h, _)| (*h).to_owned()).collect()),
            align: columns.iter().map(|(_, a)| *a).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells are empty, extra cells are kept unaligned).
    pub fn row<I, C>(&mut self, cells: I)
    where
        I: IntoIterator<Item = C>,
        C: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// The aligned text, one line per row (the header first, if any); empty without rows.
    pub fn render(&self) -> String {
        if self.rows.is_empty() {
            return String::new();
        }
        let lines: Vec<&Vec<String>> = self.header.iter().chain(&self.rows).collect();
        let columns = lines.iter().map(|l| l.len()).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for line in &lines {
            for (i, cell) in line.iter().enumerate() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in lines {
            let mut text = String::new();
            for (i, width) in widths.iter().enumerate() {
                let cell = line.get(i).map(String::as_str).unwrap_or("");
                let pad = width - cell.chars().count();
                if i > 0 {
                    text.push_str("  ");
                }
                match self.align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Right => {
                        text.extend(std::iter::repeat_n(' ', pad));
                        text.push_str(cell);
                    }
                    Align::Left => {
                        text.push_str(cell);
                        text.extend(std::iter::repeat_n(' ', pad));
                    }
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn table_aligns_columns() {
        let mut t = Table::new(&[
            ("KIND", Align::Left),
            ("SIZE", Align::Right),
            ("NAME", Align::Left),
        ]);
        t.row(["object", "12", "a"]);
        t.row(["dir", "", "bb"]);
        t.row(["link", "1234", "c -> /a"]);
        assert_eq!(
            t.render(),
            "KIND    SIZE  NAME\nobject    12  a\ndir           bb\nlink    1234  c -> /a\n"
        );
    }

    #[test]
    fn empty_table_prints_nothing() {
        let mut t = Table::new(&[("NAME", Align::Left)]);
        assert_eq!(t.render(), "");
        t.row(["é"]);
        assert_eq!(t.render(), "NAME\né\n");
    }

    #[test]
    fn formats() {
        let doc = Doc::many(vec![json!({"a": 1}), json!({"b": [2]})], "a\nb");
        assert_eq!(doc.render(Format::Table), "a\nb\n");
        assert_eq!(doc.render(Format::Jsonl), "{\"a\":1}\n{\"b\":[2]}\n");
        let parsed: Value = serde_json::from_str(&doc.render(Format::Json)).unwrap();
        assert_eq!(parsed, json!([{"a": 1}, {"b": [2]}]));

        let one = Doc::one(json!({"x": "y"}), "x=y\n");
        let parsed: Value = serde_json::from_str(&one.render(Format::Json)).unwrap();
        assert_eq!(parsed, json!({"x": "y"}));
        assert_eq!(one.render(Format::Jsonl), "{\"x\":\"y\"}\n");
        assert_eq!(one.render(Format::Table), "x=y\n");

        let report = Doc::report(json!({"n": 1, "v": [1]}), vec![json!(1)], "one\n");
        assert_eq!(report.render(Format::Jsonl), "1\n");
        let parsed: Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        assert_eq!(parsed, json!({"n": 1, "v": [1]}));

        let none = Doc::many(Vec::new(), "");
        assert_eq!(none.render(Format::Json), "[]\n");
        assert_eq!(none.render(Format::Jsonl), "");
        for format in [Format::Table, Format::Json, Format::Jsonl] {
            assert_eq!(Doc::empty().render(format), "");
        }
    }

    #[test]
    fn bytes_for_people() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }
}
