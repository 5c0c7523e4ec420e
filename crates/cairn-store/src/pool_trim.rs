//! A SQLite file's pool sized to what was needed lately: the connections a
//! busy spell opened close once a whole span (`SQLITE_IDLE`) needed fewer,
//! and after a span with no query the last one gives back what a fresh
//! connection would not hold (its prepared statements and page cache) and
//! stays open.
//!
//! Not sqlx's idle timeout: it closes the pool's last connection too and at
//! once opens another to keep `min_connections`, every span, for as long as
//! the daemon idles: a new connection thread, its set-up and the change
//! signal's looks at the files it touched, about 200 wake-ups a minute.
//! Here a task looks only from a query until the first quiet span after it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use sqlx::{AnyPool, Connection};

use crate::runtime;

/// What a pool was asked for since its last look.
#[derive(Debug)]
pub(crate) struct PoolTrim {
    /// How long a look's span is.
    span: Duration,
    /// The most connections in use at once in this span, each query's own
    /// counted.
    needed: AtomicU32,
    /// Whether a task is looking.
    looking: AtomicBool,
}

impl PoolTrim {
    pub(crate) fn new(span: Duration) -> Arc<PoolTrim> {
        Arc::new(PoolTrim {
            span,
            needed: AtomicU32::new(0),
            looking: AtomicBool::new(false),
        })
    }

    /// Counts a query about to run on `pool`, and starts the looks if none
    /// are going on.
    pub(crate) fn note(self: &Arc<Self>, pool: &AnyPool) {
        let size = pool.size();
        let idle = u32::try_from(pool.num_idle()).unwrap_or(u32::MAX);
        let in_use = size.saturating_sub(idle).saturating_add(1);
        // A load first: most queries need no more than the span already saw,
        // and a read shares the cache line where a write would take it.
        if in_use > self.needed.load(Ordering::Relaxed) {
            self.needed.fetch_max(in_use, Ordering::Relaxed);
        }
        if !self.looking.load(Ordering::Relaxed) && !self.looking.swap(true, Ordering::AcqRel) {
            match runtime::handle() {
                Ok(handle) => {
                    handle.spawn(Arc::clone(self).look(pool.clone()));
                }
                Err(_) => self.looking.store(false, Ordering::Release),
            }
        }
    }

    /// Trims the pool each span until a quiet one.
    async fn look(self: Arc<Self>, pool: AnyPool) {
        loop {
            tokio::time::sleep(self.span).await;
            // A closed pool takes no more queries: nothing to look for.
            if pool.is_closed() {
                return;
            }
            if self.trim(&pool).await {
                continue;
            }
            self.looking.store(false, Ordering::Release);
            // A query between the quiet span's end and that store saw the
            // looks going on: look again for it.
            if self.needed.load(Ordering::Relaxed) == 0 || self.looking.swap(true, Ordering::AcqRel)
            {
                return;
            }
        }
    }

    /// Closes the idle connections beyond what the span needed, and starts
    /// the next span; whether the span had a query. After a quiet one the
    /// connection left gives back its statements and page cache: a query
    /// after a quiet span prepares its statement again, which costs far
    /// less than opening a connection.
    async fn trim(&self, pool: &AnyPool) -> bool {
        let needed = self.needed.swap(0, Ordering::Relaxed);
        while pool.size() > needed.max(1) {
            let Some(conn) = pool.try_acquire() else {
                break;
            };
            if let Err(e) = conn.close().await {
                tracing::debug!(error = %e, "closing an idle pooled connection");
            }
        }
        if needed == 0
            && let Some(mut conn) = pool.try_acquire()
        {
            let shrunk = match conn.clear_cached_statements().await {
                Ok(()) => sqlx::query("PRAGMA shrink_memory")
                    .execute(&mut *conn)
                    .await
                    .map(drop),
                Err(e) => Err(e),
            };
            if let Err(e) = shrunk {
                tracing::debug!(error = %e, "shrinking an idle pooled connection");
            }
        }
        needed > 0
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

    use super::*;

    /// A SQLite file's pool as `Store::connect` makes it, on the store's
    /// runtime (real time).
    fn on_a_pool(test: impl AsyncFnOnce(AnyPool)) {
        sqlx::any::install_default_drivers();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        runtime::handle().unwrap().block_on(async {
            let options = AnyConnectOptions::from_str(&url).unwrap();
            let pool = AnyPoolOptions::new()
                .max_connections(4)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await
                .unwrap();
            // sqlx's `min_connections` may open one beside the first: start
            // from one.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = PoolTrim::new(Duration::ZERO).trim(&pool).await;
            assert_eq!(pool.size(), 1);
            given_back(&pool).await;
            test(pool.clone()).await;
            pool.close().await;
        });
    }

    /// `n` connections in use at once, each counted, then given back.
    async fn at_once(trim: &Arc<PoolTrim>, pool: &AnyPool, n: usize) {
        let mut held = Vec::new();
        for _ in 0..n {
            trim.note(pool);
            held.push(pool.acquire().await.unwrap());
        }
        drop(held);
        given_back(pool).await;
    }

    /// Waits for every connection to be idle: sqlx gives a dropped one back
    /// on a task of its own.
    async fn given_back(pool: &AnyPool) {
        for _ in 0..500 {
            if pool.num_idle() == pool.size() as usize {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!(
            "connections not given back: {} of {}",
            pool.num_idle(),
            pool.size()
        );
    }

    #[test]
    fn a_pool_keeps_what_its_last_span_needed_and_at_least_one() {
        on_a_pool(async |pool| {
            // A span long enough that its own task never looks here.
            let trim = PoolTrim::new(Duration::from_secs(3600));
            at_once(&trim, &pool, 3).await;
            assert_eq!((pool.size(), pool.num_idle()), (3, 3));
            assert!(trim.trim(&pool).await, "a span with queries");
            assert_eq!(pool.size(), 3, "the span needed three");

            at_once(&trim, &pool, 2).await;
            assert!(trim.trim(&pool).await);
            assert_eq!(pool.size(), 2, "the span needed two");

            // A quiet span: one left.
            assert!(!trim.trim(&pool).await, "a quiet span");
            assert_eq!(pool.size(), 1);
            given_back(&pool).await;
            // It answers, and after the next quiet span it answers again
            // (its statement prepared anew).
            let one = || sqlx::query("SELECT ?").bind(1_i64).execute(&pool);
            one().await.unwrap();
            given_back(&pool).await;
            assert!(!trim.trim(&pool).await);
            given_back(&pool).await;
            one().await.unwrap();
            given_back(&pool).await;

            // One in use is never closed, even past what was needed.
            at_once(&trim, &pool, 2).await;
            let held = pool.acquire().await.unwrap();
            assert_eq!(pool.num_idle(), 1);
            assert!(trim.trim(&pool).await);
            assert!(!trim.trim(&pool).await);
            assert_eq!(pool.size(), 1);
            drop(held);
        });
    }

    /// Waits (real time: the store's runtime) for the looks to end.
    async fn rests(trim: &PoolTrim) -> bool {
        for _ in 0..200 {
            if !trim.looking.load(Ordering::Acquire) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    #[test]
    fn the_looks_start_at_a_query_and_end_after_a_quiet_span() {
        on_a_pool(async |pool| {
            let trim = PoolTrim::new(Duration::from_millis(50));
            assert!(!trim.looking.load(Ordering::Acquire));
            at_once(&trim, &pool, 1).await;
            assert!(trim.looking.load(Ordering::Acquire), "a query starts them");
            assert!(rests(&trim).await, "the looks go on after a quiet span");

            at_once(&trim, &pool, 3).await;
            assert!(trim.looking.load(Ordering::Acquire));
            assert!(
                rests(&trim).await,
                "the looks go on at {} connections",
                pool.size()
            );
            assert_eq!(pool.size(), 1);

            // A closed pool ends the looks (their task held the other `Arc`).
            at_once(&trim, &pool, 1).await;
            pool.close().await;
            let mut ended = false;
            for _ in 0..200 {
                if Arc::strong_count(&trim) == 1 {
                    ended = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(ended, "the looks go on at a closed pool");
        });
    }
}
