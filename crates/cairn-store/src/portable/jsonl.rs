//! The text form of a copied table: a header line
//! `{"table":"routines","columns":[{"name":"id","kind":"text"},…]}` then one
//! JSON array per row, its cells in the header's order: `null`, an integer,
//! a string, or (for bytes) the base64 of the bytes as a string.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::{Cell, ColumnKind, TableHeader};

/// The header line of a table (no newline).
pub fn header_line(header: &TableHeader) -> String {
    // A header is plain strings and enums: serializing it cannot fail.
    serde_json::to_string(header).unwrap_or_default()
}

/// One row's line (no newline).
pub fn row_line(row: &[Cell]) -> String {
    let cells: Vec<Value> = row
        .iter()
        .map(|cell| match cell {
            Cell::Null => Value::Null,
            Cell::Int(n) => Value::from(*n),
            Cell::Text(s) => Value::String(s.clone()),
            Cell::Bytes(b) => Value::String(STANDARD.encode(b)),
        })
        .collect();
    Value::Array(cells).to_string()
}

/// Reads a header line.
pub fn parse_header(line: &str) -> Result<TableHeader, String> {
    serde_json::from_str(line).map_err(|e| format!("not a table header: {e}"))
}

/// Reads a row line of `header`'s table; the error names the column at fault.
pub fn parse_row(header: &TableHeader, line: &str) -> Result<Vec<Cell>, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Array(values) = value else {
        return Err("a row must be a JSON array".to_string());
    };
    if values.len() != header.columns.len() {
        return Err(format!(
            "{} values for the {} columns of {}",
            values.len(),
            header.columns.len(),
            header.table
        ));
    }
    header
        .columns
        .iter()
        .zip(values)
        .map(|(column, value)| {
            let bad = |what: &str| format!("column {}: expected {what}", column.name);
            Ok(match (column.kind, value) {
                (_, Value::Null) => Cell::Null,
                (ColumnKind::Int, Value::Number(n)) => {
                    Cell::Int(n.as_i64().ok_or_else(|| bad("a 64-bit integer"))?)
                }
                (ColumnKind::Int, _) => return Err(bad("an integer or null")),
                (ColumnKind::Text, Value::String(s)) => Cell::Text(s),
                (ColumnKind::Text, _) => return Err(bad("a string or null")),
                (ColumnKind::Bytes, Value::String(s)) => {
                    Cell::Bytes(STANDARD.decode(s).map_err(|_| bad("base64 text"))?)
                }
                (ColumnKind::Bytes, _) => return Err(bad("base64 text or null")),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::Column;
    use super::*;

    fn header() -> TableHeader {
        TableHeader {
            table: "memory_docs".into(),
            columns: vec![
                Column {
                    name: "id".into(),
                    kind: ColumnKind::Text,
                },
                Column {
                    name: "created_at".into(),
                    kind: ColumnKind::Int,
                },
                Column {
                    name: "embedding".into(),
                    kind: ColumnKind::Bytes,
                },
            ],
        }
    }

    #[test]
    fn rows_round_trip_through_their_lines() {
        let h = header();
        assert_eq!(parse_header(&header_line(&h)).unwrap(), h);
        let row = vec![
            Cell::Text("a \"quoted\"\nline é".into()),
            Cell::Int(i64::MIN),
            Cell::Bytes(vec![0, 255, 1, 2, 3]),
        ];
        assert_eq!(parse_row(&h, &row_line(&row)).unwrap(), row);
        let nulls = vec![Cell::Null, Cell::Null, Cell::Null];
        assert_eq!(parse_row(&h, &row_line(&nulls)).unwrap(), nulls);
    }

    #[test]
    fn bad_rows_name_the_column() {
        let h = header();
        let err = parse_row(&h, r#"["x", "soon", null]"#).unwrap_err();
        assert!(err.contains("column created_at"), "{err}");
        let err = parse_row(&h, r#"["x", 1, "!!"]"#).unwrap_err();
        assert!(err.contains("column embedding"), "{err}");
        let err = parse_row(&h, r#"["x", 1]"#).unwrap_err();
        assert!(err.contains("2 values for the 3 columns"), "{err}");
    }
}
