//! A fresh, migrated store per test: a temp SQLite file, or a new PostgreSQL schema.

use cairn_store::Store;

pub struct Fixture {
    pub store: Store,
    /// URL of the same database, for opening a second, independent pool.
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(sqlx::PgPool, String)>,
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

    pub async fn postgres() -> Option<Fixture> {
        let Ok(base) = std::env::var("CAIRN_TEST_POSTGRES_URL") else {
            if std::env::var("CAIRN_REQUIRE_POSTGRES").is_ok_and(|v| v == "1") {
                panic!("CAIRN_REQUIRE_POSTGRES=1 but CAIRN_TEST_POSTGRES_URL is not set");
            }
            eprintln!(
                "skipped: set CAIRN_TEST_POSTGRES_URL to run the PostgreSQL conformance suite"
            );
            return None;
        };
        let admin = sqlx::PgPool::connect(&base).await.unwrap();
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .unwrap();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
        let (store, report) = Store::open(&url).await.unwrap();
        assert_eq!(report.applied.len(), cairn_store::MIGRATIONS.len());
        Some(Fixture {
            store,
            url,
            _dir: None,
            pg: Some((admin, schema)),
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
            Some(_) => {
                let base = std::env::var("CAIRN_TEST_POSTGRES_URL").unwrap();
                let admin = sqlx::PgPool::connect(&base).await.unwrap();
                let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                    .execute(&admin)
                    .await
                    .unwrap();
                let sep = if base.contains('?') { '&' } else { '?' };
                let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
                Fixture {
                    store: Store::connect(&url).await.unwrap(),
                    url,
                    _dir: None,
                    pg: Some((admin, schema)),
                }
            }
        }
    }

    pub async fn cleanup(self) {
        self.store.close().await;
        if let Some((admin, schema)) = self.pg {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&admin)
                .await
                .unwrap();
            admin.close().await;
        }
    }
}
