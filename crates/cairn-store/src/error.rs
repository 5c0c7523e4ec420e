//! Store errors: what failed, on which object, never the connection password.

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL names no backend cairn supports.
    #[error(
        "unsupported database URL \"{0}\"; expected sqlite:///path/to/file.db or postgres://user@host/db"
    )]
    UnsupportedUrl(String),
    /// The database could not be opened or reached.
    #[error("cannot open database {url}: {message}")]
    Connect {
        /// The URL with any password hidden.
        url: String,
        /// What the driver said.
        message: String,
    },
    /// A migration failed or the database's history disagrees with this binary.
    #[error("migration {version} ({name}): {message}")]
    Migration {
        /// The migration's version number.
        version: i64,
        /// Its name.
        name: String,
        /// What went wrong.
        message: String,
    },
    /// A uniqueness rule refused the write (a name taken, a slot already run).
    #[error("{0}")]
    Conflict(String),
    /// The object does not exist.
    #[error("{what} {id} not found")]
    NotFound {
        /// The kind of object.
        what: &'static str,
        /// Its id.
        id: String,
    },
    /// A stored value could not be read back (hand-edited or from a newer version).
    #[error("stored {what} is unreadable: {message}")]
    Corrupt {
        /// Which value.
        what: String,
        /// Why.
        message: String,
    },
    /// A copy between databases cannot go on (schemas differ, counts disagree).
    #[error("copying table {table}: {message}")]
    Copy {
        /// The table at fault.
        table: String,
        /// What is wrong.
        message: String,
    },
    /// The vault cannot seal or open a value (a wrong key, an altered row).
    #[error("the vault: {0}")]
    Vault(String),
    /// Any other database error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

/// Whether an sqlx error is a unique-key violation.
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}
