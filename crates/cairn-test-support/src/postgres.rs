//! A fresh schema per test on the test server (`CAIRN_TEST_POSTGRES_URL`);
//! required under `CAIRN_REQUIRE_POSTGRES=1`.

/// A schema of its own on the test server, so tests never see each
/// other's rows; dropped (with all in it) when this is dropped, except after
/// a failure, when it is kept for a look (and a connection the failing test
/// left in a transaction cannot make the drop wait).
pub struct PgSchema {
    /// A URL selecting the schema (its `search_path`).
    pub url: String,
    /// The server URL the schema was made on.
    pub base: String,
    /// The schema's name.
    pub name: String,
}

/// The test server's URL, or `None` (after saying so) when `test` must skip.
pub fn server_url(test: &str) -> Option<String> {
    crate::env_or_skip(
        test,
        "CAIRN_TEST_POSTGRES_URL",
        "CAIRN_REQUIRE_POSTGRES",
        "a PostgreSQL URL, e.g. postgres://postgres@127.0.0.1:5432/cairn_test",
    )
}

impl PgSchema {
    /// A new schema for `test`, or `None` when it must skip. Callable from
    /// sync tests and from inside a runtime alike.
    pub fn create(test: &str) -> Option<PgSchema> {
        let base = server_url(test)?;
        Some(Self::create_on(base))
    }

    /// Another new schema on the same server.
    pub fn sibling(&self) -> PgSchema {
        Self::create_on(self.base.clone())
    }

    fn create_on(base: String) -> PgSchema {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        execute(&base, format!("CREATE SCHEMA {name}"));
        let sep = if base.contains('?') { '&' } else { '?' };
        PgSchema {
            url: format!("{base}{sep}options=-csearch_path%3D{name}"),
            base,
            name,
        }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept schema {} of the failed test", self.name);
            return;
        }
        execute(&self.base, format!("DROP SCHEMA {} CASCADE", self.name));
    }
}

/// Runs `sql` on its own connection to `base`, on a thread and runtime of
/// its own (so it works inside an async test and from `Drop`).
fn execute(base: &str, sql: String) {
    let base = base.to_string();
    let done = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("a runtime for the PostgreSQL fixture: {e}"))?;
        rt.block_on(async {
            let admin = sqlx::PgPool::connect(&base)
                .await
                .map_err(|e| format!("connect to CAIRN_TEST_POSTGRES_URL: {e}"))?;
            let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&admin)
                .await
                .map_err(|e| format!("{sql}: {e}"));
            admin.close().await;
            done.map(drop)
        })
    })
    .join();
    match done {
        Ok(Ok(())) => {}
        Ok(Err(why)) => panic!("{why}"),
        Err(_) => panic!("the PostgreSQL fixture's thread panicked"),
    }
}
