//! Recall latency on SQLite with 10,000 and 100,000 memories: keyword
//! (FTS5), hybrid (embedding the query through the fake embeddings server
//! on loopback, FTS5 + cosine over every stored vector), reloading the
//! vectors, and the cosine pass alone over vectors already in memory. Every
//! timed query is new, so hybrid pays for its query's embedding each time,
//! as a person's new question does.
//!
//! `cargo bench -p cairn-agent --bench memory_recall` (a plain timing
//! binary, not criterion: building 100,000 documents once is the slow part).
//! `MEMORY_BENCH_SIZES=10000` (a comma-separated list) limits the sizes.
//! The target and the latest figures are in docs/performance.md.
#![expect(clippy::unwrap_used, reason = "benchmark set-up unwraps freely")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_agent::memory::{MemoryService, MemorySettings, RecallMode, normalized, top_similar};
use cairn_core::clock::SystemClock;
use cairn_llm::EmbeddingsClient;
use cairn_llm::testing::FakeEmbeddingsServer;
use cairn_store::{MAIN_AGENT, MemoryCategory, NewMemory, Store};
use chrono::Utc;
use uuid::Uuid;

/// A small deterministic generator (no dependency, same data every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn unit(&mut self) -> f32 {
        (self.next() % 20_000) as f32 / 10_000.0 - 1.0
    }
}

fn word(rng: &mut Lcg) -> String {
    // 3,000 distinct words: common enough that queries hit many documents.
    format!("w{}", rng.next() % 3_000)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

async fn build(n: usize, dims: usize, model: &str) -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&format!("sqlite://{}/bench.db", dir.path().display()))
        .await
        .unwrap();
    let mut rng = Lcg(n as u64 ^ dims as u64);
    let now = Utc::now();
    for i in 0..n {
        let content = (0..12)
            .map(|_| word(&mut rng))
            .collect::<Vec<_>>()
            .join(" ");
        let doc = store
            .store_memory(
                &NewMemory {
                    user_id: "bench".into(),
                    agent: MAIN_AGENT.to_string(),
                    shared: false,
                    key: None,
                    content,
                    category: if i % 10 == 0 {
                        MemoryCategory::Core
                    } else {
                        MemoryCategory::Daily
                    },
                    source: "bench".into(),
                },
                now,
            )
            .await
            .unwrap();
        let vector = normalized((0..dims).map(|_| rng.unit()).collect());
        store
            .set_memory_embedding(doc.id, &doc.content_hash, model, &vector)
            .await
            .unwrap();
    }
    (store, dir)
}

async fn bench(n: usize, dims: usize, embed: &FakeEmbeddingsServer) {
    let model = "fake-embed";
    let started = Instant::now();
    let (store, _dir) = build(n, dims, model).await;
    let built = started.elapsed();
    let clock = Arc::new(SystemClock);
    let keyword = MemoryService::new(
        store.clone(),
        "bench",
        clock.clone(),
        MemorySettings::default(),
    );
    let hybrid = MemoryService::new(store.clone(), "bench", clock, MemorySettings::default())
        .with_embeddings(
            EmbeddingsClient::new(&embed.settings(Some(u32::try_from(dims).unwrap()))).unwrap(),
        );
    // Every timed query is new, as a person's are: hybrid recall embeds it
    // (a request to the embeddings server, then the cache write) before the
    // cosine pass, and keyword recall searches the same words.
    let mut rng = Lcg(0x5eed ^ n as u64 ^ dims as u64);
    let mut fresh_query = |words: usize| {
        (0..words)
            .map(|_| word(&mut rng))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Warm up: SQLite's pages and the stored vectors, loaded once into memory.
    for _ in 0..3 {
        let q = fresh_query(3);
        keyword.recall(&q, 5).await.unwrap();
        hybrid.recall(&q, 5).await.unwrap();
    }
    let embedded_before = embed.texts_embedded();
    let mut k = Vec::new();
    let mut h = Vec::new();
    let samples = 15;
    for i in 0..samples {
        let q = fresh_query(2 + i % 3);
        let t = Instant::now();
        keyword.recall(&q, 5).await.unwrap();
        k.push(t.elapsed());
        let t = Instant::now();
        let recall = hybrid.recall(&q, 5).await.unwrap();
        h.push(t.elapsed());
        assert_eq!(recall.mode, RecallMode::Hybrid);
    }
    assert_eq!(
        embed.texts_embedded() - embedded_before,
        samples,
        "each hybrid recall embedded its query"
    );
    let queries: Vec<String> = (0..3).map(|i| fresh_query(2 + i)).collect();
    let mut raw = Vec::new();
    let mut touch = Vec::new();
    for q in &queries {
        let t = Instant::now();
        let hits = store
            .search_memories("bench", MAIN_AGENT, q, 50)
            .await
            .unwrap();
        raw.push(t.elapsed());
        let ids: Vec<Uuid> = hits.iter().take(5).map(|h| h.doc.id).collect();
        let t = Instant::now();
        store.touch_memories(&ids, Utc::now()).await.unwrap();
        touch.push(t.elapsed());
    }
    println!(
        "  full-text query {:?}, touching 5 {:?}",
        median(raw),
        median(touch)
    );
    let vectors: Vec<(Uuid, Vec<f32>)> = store
        .memory_vectors("bench", MAIN_AGENT, model)
        .await
        .unwrap();
    let t = Instant::now();
    let loaded_once = store
        .memory_vectors("bench", MAIN_AGENT, model)
        .await
        .unwrap()
        .len();
    let load = t.elapsed();
    let query = normalized((0..dims).map(|i| (i % 7) as f32).collect());
    let mut c = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        std::hint::black_box(top_similar(&query, &vectors, 50));
        c.push(t.elapsed());
    }
    println!(
        "{n:>7} docs {dims:>4} dims  keyword {:>9.2?}  hybrid (query embedded, vectors kept) {:>9.2?}  (reload vectors {:>9.2?}, cosine in memory {:>9.2?})  built in {:.1?}, {loaded_once} vectors",
        median(k),
        median(h),
        load,
        median(c),
        built
    );
    store.close().await;
}

fn main() {
    let sizes: Vec<usize> = std::env::var("MEMORY_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![10_000, 100_000]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let embed = FakeEmbeddingsServer::start().await.unwrap();
        for n in sizes {
            for dims in [384, 1536] {
                bench(n, dims, &embed).await;
            }
        }
    });
}
