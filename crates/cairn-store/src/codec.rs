//! Conversions between domain values and the portable column types (BIGINT micros, TEXT).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::Row;
use sqlx::any::AnyRow;
use sqlx_core::any::{AnyArguments, AnyValueKind};
use uuid::Uuid;

use crate::StoreError;
use crate::exec::Conn;

/// Microseconds since the epoch: the stored form of every instant.
pub(crate) fn micros(t: DateTime<Utc>) -> i64 {
    t.timestamp_micros()
}

/// The optional form of [`micros`].
pub(crate) fn micros_opt(t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(micros)
}

/// How a generated statement writes its parameters. PostgreSQL numbers
/// them (`$1`). On SQLite they are anonymous (`?`) and bound in the order
/// they appear: SQLite keeps a named or numbered parameter in a list and
/// looks each one up in it as the statement is parsed and bound, which is
/// quadratic in a multi-row statement (a tenth of a burst's admission was
/// that lookup), while `?` costs nothing. So every parameter of such a
/// statement is written by these, left to right, in the order bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Params {
    /// `$1`, `$2`, … (PostgreSQL).
    Numbered,
    /// `?`, bound in order (SQLite).
    InOrder,
}

impl Params {
    /// The style of `conn`'s database.
    pub(crate) fn of(conn: &Conn) -> Params {
        if conn.backend_name() == <sqlx::Postgres as sqlx::Database>::NAME {
            Params::Numbered
        } else {
            Params::InOrder
        }
    }

    /// Parameter number `n` (from 1).
    pub(crate) fn one(self, n: usize) -> String {
        let mut sql = String::new();
        self.push(&mut sql, n);
        sql
    }

    /// Writes parameter number `n` (from 1) onto `sql`.
    fn push(self, sql: &mut String, n: usize) {
        use std::fmt::Write as _;
        match self {
            // Writing to a `String` cannot fail.
            Params::Numbered => {
                let _ = write!(sql, "${n}");
            }
            Params::InOrder => sql.push('?'),
        }
    }

    /// Rows a multi-row statement carries at most: about 256 parameters
    /// numbered, 1,024 in order (no lookup to grow with them). Few distinct
    /// row counts keep the prepared-statement cache warm.
    pub(crate) fn rows_per_statement(self, columns: usize) -> usize {
        let most = match self {
            Params::Numbered => 256,
            Params::InOrder => 1024,
        };
        (most / columns.max(1)).max(1)
    }

    /// `items` in statements of at most `most` rows: as many full ones as
    /// fit, then the rest in powers of two, largest first (100 rows of at
    /// most 60: 60, 32, 8). A statement's text is its prepared-statement
    /// cache key, and a burst's batches leave every remainder from 1 to
    /// `most - 1`: each new one was prepared anew (a thousand parameters
    /// parsed, a tenth of a burst's writes on SQLite), where these sizes
    /// are a handful, prepared once.
    pub(crate) fn pieces<T>(items: &[T], most: usize) -> impl Iterator<Item = &[T]> {
        let most = most.max(1);
        let mut rest = items;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let take = if rest.len() >= most {
                most
            } else {
                1 << rest.len().ilog2()
            };
            let (piece, after) = rest.split_at(take);
            rest = after;
            Some(piece)
        })
    }

    /// Every row count [`Params::pieces`] can give a statement of at most
    /// `most` rows, largest first: `most`, then the powers of two below it
    /// (60: 60, 32, 16, 8, 4, 2, 1). Their statements are the ones a
    /// burst's batches prepare.
    pub(crate) fn shapes(most: usize) -> impl Iterator<Item = usize> {
        let most = most.max(1);
        let below = (0..=most.ilog2())
            .rev()
            .map(|p| 1 << p)
            .filter(move |n| *n < most);
        std::iter::once(most).chain(below)
    }

    /// The placeholders of `rows` rows of `columns` values each, numbered
    /// from `first`: `($1, $2), ($3, $4)` or `(?, ?), (?, ?)`.
    /// Written in place: a burst's statements carry a thousand of them, and
    /// a `String` each was a tenth of a run end's cost to the writer.
    pub(crate) fn rows(self, rows: usize, columns: usize, first: usize) -> String {
        let mut sql = String::with_capacity(rows * columns * 6);
        for row in 0..rows {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..columns {
                if column > 0 {
                    sql.push_str(", ");
                }
                self.push(&mut sql, first + row * columns + column);
            }
            sql.push(')');
        }
        sql
    }
}

/// JSON text of a value that always serializes (plain data types).
pub(crate) fn json<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        message: e.to_string(),
    })
}

/// One row's values for a multi-row statement, encoded ahead of the write:
/// made where the caller runs (a run's end on its own task), so the one
/// writer shares them into its statement instead of making them.
pub(crate) type RowValues = std::sync::Arc<Vec<AnyValueKind>>;

/// A row's `columns` values, bound by `bind` in the statement's column
/// order with the same Rust types a `sqlx::query(..).bind(..)` would take.
pub(crate) fn row_values(
    what: &str,
    columns: usize,
    bind: impl FnOnce(&mut AnyArguments) -> Result<(), sqlx::error::BoxDynError>,
) -> Result<RowValues, StoreError> {
    let mut args = AnyArguments::default();
    // Its size known: no growing (four moves of a notification's row).
    args.values.0.reserve_exact(columns);
    bind(&mut args).map_err(|e| StoreError::Corrupt {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    // The vector itself, not a copy of it as a slice.
    Ok(std::sync::Arc::new(args.values.0))
}

/// The arguments of one statement carrying `rows`, in order: shared, not
/// copied (a text value is a reference count).
pub(crate) fn statement_args<'a>(rows: impl IntoIterator<Item = &'a RowValues>) -> AnyArguments {
    let mut args = AnyArguments::default();
    for row in rows {
        args.values.0.extend(row.iter().cloned());
    }
    args
}

/// Typed reads from a row, with errors that name the column.
pub(crate) struct Cols<'r>(pub &'r AnyRow);

impl Cols<'_> {
    fn corrupt(&self, col: &str, message: impl ToString) -> StoreError {
        StoreError::Corrupt {
            what: col.to_string(),
            message: message.to_string(),
        }
    }

    pub fn text(&self, col: &str) -> Result<String, StoreError> {
        Ok(self.0.try_get::<String, _>(col)?)
    }

    pub fn text_opt(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.0.try_get::<Option<String>, _>(col)?)
    }

    pub fn int(&self, col: &str) -> Result<i64, StoreError> {
        Ok(self.0.try_get::<i64, _>(col)?)
    }

    pub fn int_opt(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.0.try_get::<Option<i64>, _>(col)?)
    }

    /// Booleans are stored as 0/1 on both backends.
    pub fn boolean(&self, col: &str) -> Result<bool, StoreError> {
        Ok(self.int(col)? != 0)
    }

    pub fn uint(&self, col: &str) -> Result<u64, StoreError> {
        let n = self.int(col)?;
        u64::try_from(n).map_err(|_| self.corrupt(col, format!("negative count {n}")))
    }

    pub fn uint_opt(&self, col: &str) -> Result<Option<u64>, StoreError> {
        self.int_opt(col)?
            .map(|n| u64::try_from(n).map_err(|_| self.corrupt(col, format!("negative count {n}"))))
            .transpose()
    }

    pub fn time(&self, col: &str) -> Result<DateTime<Utc>, StoreError> {
        let n = self.int(col)?;
        DateTime::from_timestamp_micros(n)
            .ok_or_else(|| self.corrupt(col, format!("instant {n} out of range")))
    }

    pub fn time_opt(&self, col: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        match self.int_opt(col)? {
            Some(n) => DateTime::from_timestamp_micros(n)
                .map(Some)
                .ok_or_else(|| self.corrupt(col, format!("instant {n} out of range"))),
            None => Ok(None),
        }
    }

    pub fn uuid(&self, col: &str) -> Result<Uuid, StoreError> {
        let s = self.text(col)?;
        Uuid::parse_str(&s).map_err(|e| self.corrupt(col, e))
    }

    pub fn uuid_opt(&self, col: &str) -> Result<Option<Uuid>, StoreError> {
        self.text_opt(col)?
            .map(|s| Uuid::parse_str(&s).map_err(|e| self.corrupt(col, e)))
            .transpose()
    }

    pub fn json<T: DeserializeOwned>(&self, col: &str) -> Result<T, StoreError> {
        let s = self.text(col)?;
        serde_json::from_str(&s).map_err(|e| self.corrupt(col, e))
    }
}

#[cfg(test)]
mod tests {
    use super::Params;

    #[test]
    fn placeholders_are_numbered_on_postgres_and_in_order_on_sqlite() {
        assert_eq!(Params::Numbered.rows(2, 2, 3), "($3, $4), ($5, $6)");
        assert_eq!(Params::InOrder.rows(2, 2, 3), "(?, ?), (?, ?)");
        assert_eq!(Params::Numbered.one(7), "$7");
        assert_eq!(Params::InOrder.one(7), "?");
        // SQLite's statements carry more rows: no lookup grows with them.
        assert_eq!(Params::Numbered.rows_per_statement(17), 15);
        assert_eq!(Params::InOrder.rows_per_statement(17), 60);
        assert_eq!(Params::InOrder.rows_per_statement(4000), 1);
    }

    #[test]
    fn pieces_are_full_statements_then_powers_of_two() {
        let items: Vec<u32> = (0..100).collect();
        let sizes: Vec<usize> = Params::pieces(&items, 60).map(<[u32]>::len).collect();
        assert_eq!(sizes, [60, 32, 8]);
        let again: Vec<u32> = Params::pieces(&items, 60).flatten().copied().collect();
        assert_eq!(again, items, "every item once, in order");
        let sizes: Vec<usize> = Params::pieces(&items[..7], 60).map(<[u32]>::len).collect();
        assert_eq!(sizes, [4, 2, 1]);
        assert_eq!(Params::pieces(&items[..0], 60).count(), 0);
        let many: Vec<u32> = (0..3 * 170).collect();
        for most in [1, 2, 60, 64, 170] {
            let shapes: Vec<usize> = Params::shapes(most).collect();
            assert_eq!(shapes[0], most, "the full statement first");
            for n in 0..=3 * most {
                for piece in Params::pieces(&many[..n], most) {
                    assert!(
                        shapes.contains(&piece.len()),
                        "{n} items in pieces of at most {most}: a piece of {} is not among {shapes:?}",
                        piece.len()
                    );
                }
            }
        }
        assert_eq!(
            Params::shapes(60).collect::<Vec<_>>(),
            [60, 32, 16, 8, 4, 2, 1]
        );
        assert_eq!(
            Params::shapes(64).collect::<Vec<_>>(),
            [64, 32, 16, 8, 4, 2, 1]
        );
        assert_eq!(
            Params::pieces(&items[..3], 0).count(),
            3,
            "at least one row each"
        );
        // A burst's remainders, 1 to 59 rows: six sizes of statement, not 59.
        let mut sizes: Vec<usize> = (1..60)
            .flat_map(|n| Params::pieces(&items[..n], 60).map(<[u32]>::len))
            .collect();
        sizes.sort_unstable();
        sizes.dedup();
        assert_eq!(sizes, [1, 2, 4, 8, 16, 32]);
    }
}
