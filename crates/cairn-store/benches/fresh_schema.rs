//! A fresh database's schema: made from the baseline (what `Store::open`
//! does on an empty database) against every migration applied in turn (what
//! it did before the baseline, and what `migrate_up_to` still does), on a new
//! SQLite file each time. Median of `FRESH_SCHEMA_RUNS` (15) in ms; prints JSON.
//! Run: `cargo bench -p cairn-store --bench fresh_schema`.
#![expect(clippy::unwrap_used, reason = "a benchmark stops at the first failure")]

use std::time::Instant;

use cairn_store::{BASELINE_VERSION, MIGRATIONS, Store};
use serde_json::json;

fn median(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2] * 100.0).round() / 100.0
}

fn main() {
    let runs: usize = std::env::var("FRESH_SCHEMA_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (mut baseline, mut steps) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for _ in 0..runs {
            for from_baseline in [true, false] {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/cairn.db", dir.path().display());
                let started = Instant::now();
                let store = Store::connect(&url).await.unwrap();
                let report = if from_baseline {
                    store.migrate().await.unwrap()
                } else {
                    store.migrate_up_to(i64::MAX).await.unwrap()
                };
                let ms = started.elapsed().as_secs_f64() * 1e3;
                assert_eq!(report.applied.len(), MIGRATIONS.len());
                store.close().await;
                if from_baseline {
                    &mut baseline
                } else {
                    &mut steps
                }
                .push(ms);
            }
        }
    });
    println!(
        "{}",
        json!({
            "runs": runs,
            "migrations": MIGRATIONS.len(),
            "baseline_version": BASELINE_VERSION,
            "open_and_migrate_ms_median": {
                "from_the_baseline": median(baseline),
                "step_by_step": median(steps),
            },
        })
    );
}
