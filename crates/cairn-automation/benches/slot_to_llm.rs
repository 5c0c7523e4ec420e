//! A single routine's slot to its LLM request, in real time on SQLite: a
//! `lightweight` routine due every second, the real engine and executor,
//! and a provider that notes when each request reaches it. Prints JSON
//! (p50/p99/max over `SLOT_TO_LLM_FIRES`, default 60).
//!
//! `cargo bench -p cairn-automation --bench slot_to_llm`; the target is in
//! docs/performance.md.
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_automation::routines::actions::AgentActions;
use cairn_automation::routines::engine::{EngineSettings, RoutineEngine};
use cairn_core::clock::SystemClock;
use cairn_core::routine::{Routine, RoutineSpec, SpecFormat};
use cairn_llm::testing::InstantProvider;
use cairn_llm::{ChatRequest, ChatResponse, LlmError, LlmProvider};
use cairn_store::Store;
use chrono::{DateTime, Timelike, Utc};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Notes when each request arrives, then answers `ROUTINE_OK` at once.
#[derive(Debug)]
struct Stamped {
    answer: InstantProvider,
    at: Mutex<Vec<DateTime<Utc>>>,
}

#[async_trait]
impl LlmProvider for Stamped {
    fn name(&self) -> &str {
        "stamped"
    }
    fn model(&self) -> &str {
        "stamped"
    }
    async fn complete(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.at.lock().unwrap().push(Utc::now());
        self.answer.complete(request).await
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench());
}

async fn bench() {
    let fires: usize = std::env::var("SLOT_TO_LLM_FIRES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/cairn.db", dir.path().display());
    let (store, _) = Store::open(&url).await.unwrap();
    let spec = RoutineSpec::parse(
        "name: tick\ntrigger: {type: cron, schedule: '* * * * * *'}\naction: {type: lightweight, prompt: 'Anything to do? Answer ROUTINE_OK if not.'}\n",
        SpecFormat::Yaml,
    )
    .unwrap();
    let now = Utc::now();
    let mut routine = Routine::new(spec, "bench", now);
    let next = now.with_nanosecond(0).unwrap() + chrono::Duration::seconds(2);
    routine.runtime.next_fire_at = Some(next);
    store.create_routine(&routine).await.unwrap();
    let provider = Arc::new(Stamped {
        answer: InstantProvider::always(InstantProvider::text_response("ROUTINE_OK"))
            .without_recording(),
        at: Mutex::new(Vec::new()),
    });
    let actions = AgentActions::new(store.clone(), dir.path(), Arc::new(SystemClock))
        .with_llm(provider.clone(), provider.clone());
    let engine = RoutineEngine::new(
        store.clone(),
        Arc::new(SystemClock),
        Arc::new(actions),
        None,
        EngineSettings::new("bench", chrono_tz::UTC),
    );
    let cancel = CancellationToken::new();
    let running = tokio::spawn({
        let (engine, cancel) = (engine.clone(), cancel.clone());
        async move { engine.run(cancel).await }
    });
    eprintln!("{fires} fires, one a second");
    while provider.at.lock().unwrap().len() < fires + 1 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cancel.cancel();
    running.await.unwrap();
    // The first fire comes with the engine's start: left out.
    let mut ms: Vec<f64> = provider.at.lock().unwrap()[1..]
        .iter()
        .map(|at| {
            let slot = at.with_nanosecond(0).unwrap();
            (*at - slot).num_microseconds().unwrap() as f64 / 1000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    let pick = |p: f64| ms[((ms.len() as f64 * p) as usize).min(ms.len() - 1)];
    println!(
        "{}",
        json!({
            "fires": ms.len(),
            "slot_to_llm_request_ms": {
                "p50": (pick(0.5) * 100.0).round() / 100.0,
                "p99": (pick(0.99) * 100.0).round() / 100.0,
                "max": (ms[ms.len() - 1] * 100.0).round() / 100.0,
            }
        })
    );
}
