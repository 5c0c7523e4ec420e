//! A fresh, migrated store per test: a temp SQLite file, or a new PostgreSQL schema.

use cairn_store::Store;
use cairn_test_support::postgres::PgSchema;

pub struct Fixture {
    pub store: Store,
    /// URL of the same database, for opening a second, independent pool.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<PgSchema>,
}

impl Fixture {
    pub async fn sqlite() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/nested/cairn.db", dir.path().display());
        let (store, report) = Store::open(&url).await.unwrap();
        assert_eq!(report.applied.len(), cairn_store::MIGRATIONS.len());
        Fixture {
            store,
            url,
            _dir: Some(dir),
            pg: None,
        }
    }

    /// A fresh schema on the test server, or `None` when `test` must skip
    /// (the one rule of `cairn_test_support::postgres`).
    pub async fn postgres(test: &str) -> Option<Fixture> {
        let schema = PgSchema::create(test)?;
        let (store, report) = Store::open(&schema.url).await.unwrap();
        assert_eq!(report.applied.len(), cairn_store::MIGRATIONS.len());
        Some(Fixture {
            store,
            url: schema.url.clone(),
            _dir: None,
            pg: Some(schema),
        })
    }

    /// A new, empty database of the same backend, not migrated (for
    /// building a database as an older cairn left it).
    pub async fn sibling(&self) -> Fixture {
        match &self.pg {
            None => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/old.db", dir.path().display());
                Fixture {
                    store: Store::connect(&url).await.unwrap(),
                    url,
                    _dir: Some(dir),
                    pg: None,
                }
            }
            Some(pg) => {
                let schema = pg.sibling();
                Fixture {
                    store: Store::connect(&schema.url).await.unwrap(),
                    url: schema.url.clone(),
                    _dir: None,
                    pg: Some(schema),
                }
            }
        }
    }

    pub async fn cleanup(self) {
        self.store.close().await;
        // The schema goes after the pool, with `self.pg`.
    }
}
