//! Opening a store from a URL: SQLite files are created on first use, with
//! WAL, and are the owner's alone: a new directory 0700, the database 0600
//! (created here before SQLite opens it, whatever the umask; SQLite gives
//! its `-wal` and `-shm` the database's mode, and they are set to 0600
//! after opening too).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{AnyConnection, AnyPool, Executor};

use crate::StoreError;
use crate::migrate::{self, MigrationReport};
use crate::pool_trim::PoolTrim;
use crate::runtime;
use crate::signal::{Hub, Source};
pub(crate) use crate::writer::WriteTx;
use crate::writer::{OwnWriter, Writer};

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A local SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

impl Backend {
    /// `sqlite` or `postgres`.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A handle on the database; cheap to clone (a connection pool inside).
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The URL with any password hidden, for messages.
    display_url: String,
    /// This process's SQLite writers, one at a time (see [`Store::begin_write`]).
    writer: Writer,
    /// The change signal (see [`crate::signal`]).
    signal: Arc<Hub>,
    /// A SQLite file's pool kept to what it needed (see [`crate::pool_trim`]).
    trim: Option<Arc<PoolTrim>>,
}

/// How long the writers' own SQLite connection may sit unused before it
/// closes (see [`crate::writer`]), and the span over which a file's pool
/// keeps only the connections it needed (see [`crate::pool_trim`]): a busy
/// spell's are closed 15 to 30 s after it, and what they held is back
/// within a minute (jemalloc purges 10 s after a free).
pub(crate) const SQLITE_IDLE: Duration = Duration::from_secs(15);

/// How long a writer waits for SQLite's lock before giving up.
pub(crate) const SQLITE_BUSY_TIMEOUT_MS: u32 = 10_000;

#[cairn_store_macros::on_store_runtime]
impl Store {
    /// Opens the database at `url` and applies any pending migrations.
    pub async fn open(url: &str) -> Result<(Store, MigrationReport), StoreError> {
        let store = Store::connect(url).await?;
        let report = store.migrate().await?;
        Ok((store, report))
    }

    /// Opens the database at `url` without migrating (for status checks).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let display_url = cairn_core::config::redact_url(url);
        let connect_err = |e: sqlx::Error| StoreError::Connect {
            url: display_url.clone(),
            message: e.to_string(),
        };
        let (backend, url) = normalize(url)?;
        // The hop has started the store's runtime, unless it cannot start.
        let runtime = runtime::handle().map_err(|message| StoreError::Connect {
            url: display_url.clone(),
            message: message.to_string(),
        })?;
        let options = AnyConnectOptions::from_str(&url).map_err(connect_err)?;
        let in_memory = url.contains(":memory:");
        let pool_options = match backend {
            Backend::Sqlite => {
                let sized = if in_memory {
                    // An in-memory database exists once per connection,
                    // and only while that connection is open.
                    AnyPoolOptions::new()
                        .max_connections(1)
                        .idle_timeout(None)
                        .max_lifetime(None)
                } else {
                    // Each connection keeps its page cache (up to 2 MB) and
                    // prepared statements; the ones a burst opened close
                    // once no longer needed (`pool_trim`), giving that
                    // memory back. Not through sqlx's timeouts: they open
                    // the kept one anew every span.
                    AnyPoolOptions::new()
                        .max_connections(4)
                        .min_connections(1)
                        .idle_timeout(None)
                        .max_lifetime(None)
                };
                sized
                    .after_connect(|conn, _meta| Box::pin(async move { set_up_sqlite(conn).await }))
            }
            Backend::Postgres => AnyPoolOptions::new().max_connections(10),
        };
        let pool = pool_options
            .acquire_timeout(Duration::from_secs(15))
            .connect_with(options.clone())
            .await
            .map_err(connect_err)?;
        let writer = match backend {
            Backend::Sqlite => match sqlite_file(&url) {
                Some(file) => Writer::Own(Arc::new(tokio::sync::Mutex::new(OwnWriter::new(file)))),
                None => Writer::Pooled(Some(Arc::default())),
            },
            Backend::Postgres => Writer::Pooled(None),
        };
        if let Some(file) = sqlite_file(&url) {
            private_companions(&file);
        }
        let source = match backend {
            Backend::Postgres => Source::Postgres { url: url.clone() },
            Backend::Sqlite if url.contains(":memory:") => Source::Memory,
            Backend::Sqlite => {
                let rest = url.strip_prefix("sqlite://").unwrap_or(&url);
                let path = rest.split_once('?').map_or(rest, |(p, _)| p);
                Source::Sqlite {
                    url: url.clone(),
                    wal: PathBuf::from(format!("{path}-wal")),
                }
            }
        };
        let trim = matches!(source, Source::Sqlite { .. }).then(|| PoolTrim::new(SQLITE_IDLE));
        Ok(Store {
            pool,
            trim,
            signal: Arc::new(Hub::new(source, runtime)),
            backend,
            display_url,
            writer,
        })
    }

    /// Applies pending migrations; safe to call from several processes at once.
    pub async fn migrate(&self) -> Result<MigrationReport, StoreError> {
        migrate::apply(self).await
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL with any password hidden.
    pub fn display_url(&self) -> &str {
        &self.display_url
    }

    /// Checks the database answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(self.pool()).await?;
        Ok(())
    }

    /// Closes every connection (the change signal's too); further calls fail.
    pub async fn close(&self) {
        self.stop_signal().await;
        self.writer.close().await;
        self.pool.close().await;
    }

    /// The pool, for queries; only ever inside a hop onto the store's
    /// runtime (see [`crate::runtime`]), or sqlx's timers would run on the
    /// caller's clock.
    pub(crate) fn pool(&self) -> &AnyPool {
        // A debug check (every test runs it): a method reached the pool
        // without the hop, so its impl block lacks #[on_store_runtime].
        debug_assert!(
            runtime::inside(),
            "a store query outside the store's runtime: is #[on_store_runtime] missing?"
        );
        if let Some(trim) = &self.trim {
            trim.note(&self.pool);
        }
        &self.pool
    }

    /// Where write transactions run.
    pub(crate) fn writer(&self) -> &Writer {
        &self.writer
    }

    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.signal
    }

    /// Starts a write transaction, in this process's writers' turn (see
    /// [`crate::writer`]); other processes' writers queue on SQLite's busy
    /// timeout.
    pub(crate) async fn begin_write(&self) -> Result<WriteTx, StoreError> {
        // Checked as in `pool()`: sqlx's timers belong on the store's runtime.
        debug_assert!(
            runtime::inside(),
            "a write transaction outside the store's runtime: is #[on_store_runtime] missing?"
        );
        Ok(self
            .writer
            .begin(&self.pool, self.backend, Arc::clone(&self.signal))
            .await?)
    }
}

/// The set-up of every SQLite connection.
pub(crate) async fn set_up_sqlite(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    for pragma in SQLITE_SET_UP {
        conn.execute(*pragma).await?;
    }
    let busy = format!("PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}");
    conn.execute(sqlx::AssertSqlSafe(busy)).await?;
    Ok(())
}

/// The set-up every SQLite connection shares (the writers' own, in
/// `direct.rs`, waits for the lock its own way rather than with a busy
/// timeout).
pub(crate) const SQLITE_SET_UP: &[&str] = &[
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    "PRAGMA foreign_keys = ON",
    // Checkpoints are the change signal's listener's (`signal/sqlite.rs`),
    // off the commits; a commit runs one only past this fallback (40 MiB),
    // when no process listens.
    "PRAGMA wal_autocheckpoint = 10000",
    // A WAL started over is written again from its start, not cut to a
    // smaller file: cutting it is the next commit's, under the writer's
    // lock (13.8 ms for a WAL of 40 MiB, the fallback's size, at each start
    // over under signed webhooks). Cut only past the fallback's size, for
    // a WAL a long read kept from starting over.
    "PRAGMA journal_size_limit = 67108864",
    // A statement's journal (kept to undo a multi-row statement that fails
    // halfway, inside a transaction) and temporary tables stay in memory:
    // on files, a batch's multi-row writes (past 64 KiB of journal) each
    // created, wrote and deleted a file under /var/tmp.
    "PRAGMA temp_store = MEMORY",
];

/// The file and query of a SQLite URL naming a file (`None` for
/// PostgreSQL, in-memory databases and other schemes).
fn sqlite_parts(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("sqlite:")?;
    if rest.starts_with(":memory:") {
        return None;
    }
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    (!path.is_empty()).then_some((path, query))
}

/// The database file a SQLite URL names (`None` for PostgreSQL and
/// in-memory databases), for those who check its permissions.
pub fn sqlite_file(url: &str) -> Option<PathBuf> {
    sqlite_parts(url).map(|(path, _)| PathBuf::from(path))
}

/// Picks the backend and makes SQLite URLs create their file (and its directory).
fn normalize(url: &str) -> Result<(Backend, String), StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok((Backend::Postgres, url.to_string()));
    }
    let Some(rest) = url.strip_prefix("sqlite:") else {
        return Err(StoreError::UnsupportedUrl(cairn_core::config::redact_url(
            url,
        )));
    };
    if rest.starts_with(":memory:") {
        return Ok((Backend::Sqlite, url.to_string()));
    }
    let Some((path, query)) = sqlite_parts(url) else {
        return Err(StoreError::UnsupportedUrl(url.to_string()));
    };
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    if !params.iter().any(|p| p.starts_with("mode=")) {
        params.push("mode=rwc");
    }
    if params.contains(&"mode=rwc") {
        create_private(Path::new(path), url)?;
    }
    Ok((
        Backend::Sqlite,
        format!("sqlite://{path}?{}", params.join("&")),
    ))
}

/// Creates the database file (and its directory) for the owner alone, when
/// missing: SQLite would create it with the umask's mode (usually 0644),
/// and its `-wal` and `-shm` after it.
#[expect(
    clippy::disallowed_methods,
    reason = "once per Store::open; a stat, a mkdir and an empty file"
)]
fn create_private(path: &Path, url: &str) -> Result<(), StoreError> {
    let failed = |what: &str, at: &Path, e: std::io::Error| StoreError::Connect {
        url: cairn_core::config::redact_url(url),
        message: format!("cannot create {what} {}: {e}", at.display()),
    };
    let parent: PathBuf = path.parent().map(Path::to_path_buf).unwrap_or_default();
    if !parent.as_os_str().is_empty() && !parent.exists() {
        let mut dir = std::fs::DirBuilder::new();
        dir.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
        dir.create(&parent)
            .map_err(|e| failed("directory", &parent, e))?;
    }
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    match file.open(path) {
        // An empty file is a new SQLite database.
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(failed("the database", path, e)),
    }
}

/// Sets the database's `-wal` and `-shm` to 0600 where they exist (an older
/// database file with a wider mode gave them its own). Best effort: a
/// failure is logged, the store still opens.
#[expect(
    clippy::disallowed_methods,
    reason = "once per Store::open; two chmods"
)]
fn private_companions(database: &Path) {
    #[cfg(unix)]
    for suffix in ["-wal", "-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        let side = PathBuf::from(name);
        let Ok(meta) = std::fs::metadata(&side) else {
            continue;
        };
        if meta.permissions().mode() & 0o077 != 0
            && let Err(error) =
                std::fs::set_permissions(&side, std::fs::Permissions::from_mode(0o600))
        {
            tracing::warn!(file = %side.display(), %error, "cannot make the database's companion file private");
        }
    }
    #[cfg(not(unix))]
    let _ = database;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_gain_create_mode() {
        let (b, u) = normalize("sqlite:///tmp/x/cairn.db").unwrap();
        assert_eq!(
            (b, u.as_str()),
            (Backend::Sqlite, "sqlite:///tmp/x/cairn.db?mode=rwc")
        );
        let (_, u) = normalize("sqlite:///tmp/cairn.db?mode=ro").unwrap();
        assert_eq!(u, "sqlite:///tmp/cairn.db?mode=ro");
        let (b, _) = normalize("postgres://u@h/db").unwrap();
        assert_eq!(b, Backend::Postgres);
    }

    #[test]
    fn other_schemes_are_refused_without_echoing_passwords() {
        let err = normalize("mysql://u:secret@h/db").unwrap_err().to_string();
        assert!(
            err.contains("unsupported") && !err.contains("secret"),
            "{err}"
        );
    }
}
