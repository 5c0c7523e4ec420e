//! What a store call's hop onto the store's runtime costs, per call, on a
//! multi-thread caller (the daemon's and the CLI's runtimes) and on a
//! current-thread one (tests, whose clock may be paused): `Store::ping`
//! (`SELECT 1` on SQLite, through the hop) against the same query on a
//! plain sqlx pool polled by the caller (no hop), and against a call
//! spawned onto another runtime and awaited through its `JoinHandle` (the
//! other way to run sqlx off the caller's clock). Then the two ways alone,
//! with no query: `Store::signal_ready` on an in-memory store (a hop around
//! nothing) against spawning an empty task there. Median of rounds, in
//! nanoseconds per call. Prints JSON.
//! Run: `cargo bench -p cairn-store --bench hop`.
#![expect(clippy::unwrap_used, reason = "a benchmark stops at the first failure")]

use std::time::{Duration, Instant};

use cairn_store::Store;
use serde_json::{Value, json};
use sqlx::AnyPool;
use sqlx::any::AnyPoolOptions;
use tokio::runtime::{Builder, Runtime};

const CALLS: u32 = 20_000;
const ROUNDS: usize = 7;

/// Nanoseconds per call of `call` over one round of `CALLS` calls.
async fn round(call: &mut impl AsyncFnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        call().await;
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn median(mut rounds: Vec<f64>) -> f64 {
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2].round()
}

async fn pool(url: &str) -> AnyPool {
    AnyPoolOptions::new()
        .max_connections(4)
        .connect(url)
        .await
        .unwrap()
}

fn measure(caller: &Runtime, elsewhere: &Runtime, url: &str) -> Value {
    // Built on the other runtime, so its timers and tasks live there.
    let remote = elsewhere.block_on(pool(url));
    let other = elsewhere.handle().clone();
    caller.block_on(async {
        let (store, _) = Store::open(url).await.unwrap();
        let (memory, _) = Store::open("sqlite::memory:").await.unwrap();
        let local = pool(url).await;
        let mut through_store = async || store.ping().await.unwrap();
        let mut no_hop = async || {
            sqlx::query("SELECT 1").execute(&local).await.unwrap();
        };
        let mut spawned = async || {
            let pool = remote.clone();
            let call = other.spawn(async move { sqlx::query("SELECT 1").execute(&pool).await });
            call.await.unwrap().unwrap();
        };
        let mut hop_alone = async || {
            memory.signal_ready(Duration::ZERO).await;
        };
        let mut spawn_alone = async || other.spawn(async {}).await.unwrap();
        // Rounds of the ways interleave, so a load that comes and goes on
        // the machine weighs on each alike.
        let mut rounds = [const { Vec::new() }; 5];
        for n in 0..=ROUNDS {
            let times = [
                round(&mut through_store).await,
                round(&mut no_hop).await,
                round(&mut spawned).await,
                round(&mut hop_alone).await,
                round(&mut spawn_alone).await,
            ];
            // The first round warms up.
            if n > 0 {
                for (all, time) in rounds.iter_mut().zip(times) {
                    all.push(time);
                }
            }
        }
        let [through_store, no_hop, spawned, hop_alone, spawn_alone] = rounds.map(median);
        store.close().await;
        memory.close().await;
        json!({
            "store_call_through_hop_ns": through_store,
            "plain_sqlx_no_hop_ns": no_hop,
            "spawned_on_other_runtime_ns": spawned,
            "hop_alone_no_query_ns": hop_alone,
            "spawn_alone_no_query_ns": spawn_alone,
        })
    })
}

fn main() {
    sqlx::any::install_default_drivers();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/hop.db?mode=rwc", dir.path().display());
    let elsewhere = Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let multi = Builder::new_multi_thread().enable_all().build().unwrap();
    let current = Builder::new_current_thread().enable_all().build().unwrap();
    let out = json!({
        "select_1_sqlite_per_call": {
            "multi_thread_caller": measure(&multi, &elsewhere, &url),
            "current_thread_caller": measure(&current, &elsewhere, &url),
        }
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
