//! Memory over a real SQLite store and the fake embeddings / LLM servers:
//! hybrid ranking, keyword-only recall, the embedding cache, the
//! `[Memory context]` of a chat turn, daily summaries, hygiene, the
//! snapshot round-trip, and each agent's memory apart.
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::chat::{ChatService, ChatSettings, ChatSink, Inbound, Reply};
use cairn_agent::memory::{
    HygieneSettings, MatchedBy, MemoryService, MemorySettings, RecallMode, SNAPSHOT_FILE,
    export_snapshot, hydrate, run_hygiene,
};
use cairn_agent::prompt::RuntimeInfo;
use cairn_agent::session::SessionManager;
use cairn_agent::{AgentLoop, HookRegistry, LoopConfig, PolicyGate, ToolRegistry, ToolRunner};
use cairn_core::clock::{Clock, FixedClock};
use cairn_llm::testing::{FakeEmbeddingsServer, FakeLlmServer, Scripted};
use cairn_llm::{EmbeddingsClient, build_provider};
use cairn_store::{MAIN_AGENT, MemoryCategory, Store};
use chrono::{TimeZone, Utc};

struct Fx {
    store: Store,
    clock: Arc<FixedClock>,
    _db: tempfile::TempDir,
}

async fn fx() -> Fx {
    let db = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
        .await
        .unwrap();
    let clock = Arc::new(FixedClock::new(
        Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap(),
    ));
    Fx {
        store,
        clock,
        _db: db,
    }
}

fn service(fx: &Fx, settings: MemorySettings) -> MemoryService {
    MemoryService::new(fx.store.clone(), "ada", fx.clock.clone(), settings)
}

#[tokio::test]
async fn a_document_found_both_ways_ranks_above_one_found_one_way() {
    let fx = fx().await;
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    let all = MemorySettings {
        min_relevance: 0.0,
        ..MemorySettings::default()
    };
    let memory = service(&fx, all.clone())
        .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    let both = memory
        .store_memory(
            None,
            "Dentist appointment on Friday",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    // "dentists" is near "dentist" by meaning only (the fake's four-letter stem).
    let vector_only = memory
        .store_memory(
            None,
            "The dentists of Lyon are expensive",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    memory.flush().await;
    // Stored while the provider is down: no vector, found by words only.
    embed.set_failing(true);
    let keyword_only = memory
        .store_memory(
            None,
            "dentist appointment reminder card",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    memory.flush().await;
    embed.set_failing(false);
    memory
        .store_memory(
            None,
            "Gardening: tomatoes in May",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    memory.flush().await;

    let recall = memory.recall("dentist appointment", 10).await.unwrap();
    assert_eq!(recall.mode, RecallMode::Hybrid);
    assert_eq!(recall.note, None);
    let order: Vec<_> = recall
        .hits
        .iter()
        .map(|h| (h.doc.id, h.matched_by))
        .collect();
    assert_eq!(
        order,
        vec![
            (both.id, MatchedBy::Both),
            (keyword_only.id, MatchedBy::Keyword),
            (vector_only.id, MatchedBy::Vector),
        ],
        "{recall:#?}"
    );
    let top = &recall.hits[0];
    assert!(top.score > recall.hits[1].score && top.score <= 1.0);
    assert_eq!(top.keyword_score, Some(1.0));
    assert!(top.vector_score.unwrap() > 0.5);
    // 0.3 × keyword score 1.0, no vector.
    assert!((recall.hits[1].score - 0.3).abs() < 1e-9);

    // With the default minimum relevance (0.4), one-sided weak hits go.
    let strict = service(&fx, MemorySettings::default())
        .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    let recall = strict.recall("dentist appointment", 10).await.unwrap();
    assert_eq!(
        recall.hits.iter().map(|h| h.doc.id).collect::<Vec<_>>(),
        vec![both.id]
    );
    // Recall marks what it returned as accessed.
    let doc = fx.store.get_memory(both.id).await.unwrap().unwrap();
    assert_eq!(doc.accessed_at, Some(fx.clock.now()));
}

#[tokio::test]
async fn without_embeddings_recall_is_keyword_only_and_says_so() {
    let fx = fx().await;
    let memory = service(&fx, MemorySettings::default());
    memory
        .store_memory(
            Some("coffee"),
            "Prefers espresso, no sugar",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    let recall = memory.recall("what coffee does she like", 5).await.unwrap();
    assert_eq!(recall.mode, RecallMode::KeywordOnly);
    assert!(recall.note.unwrap().contains("keyword-only"));
    assert_eq!(recall.hits.len(), 1);
    assert_eq!(recall.hits[0].matched_by, MatchedBy::Keyword);
    // One of two meaningful terms ("coffee", "like"): √½.
    assert!((recall.hits[0].score - 0.5_f64.sqrt()).abs() < 1e-9);

    // A provider that fails also falls back, saying why.
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    embed.set_failing(true);
    let memory = memory.with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    let recall = memory.recall("coffee", 5).await.unwrap();
    assert_eq!(recall.mode, RecallMode::KeywordOnly);
    assert!(recall.note.unwrap().contains("failed"));
    assert_eq!(recall.hits.len(), 1);
}

#[tokio::test]
async fn embeddings_are_cached_by_content_hash() {
    let fx = fx().await;
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    let memory = service(&fx, MemorySettings::default())
        .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    memory
        .store_memory(Some("a"), "same words", MemoryCategory::Core, "t")
        .await
        .unwrap();
    memory.flush().await;
    assert_eq!(embed.texts_embedded(), 1);
    // Another person's identical memory (same embedded text) costs nothing.
    let other = MemoryService::new(
        fx.store.clone(),
        "bob",
        fx.clock.clone(),
        MemorySettings::default(),
    )
    .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    other
        .store_memory(Some("a"), "same words", MemoryCategory::Core, "t")
        .await
        .unwrap();
    other.flush().await;
    assert_eq!(embed.texts_embedded(), 1);
    // Re-indexing finds everything in the cache.
    let mut seen = Vec::new();
    let stored = memory
        .reindex(|done, total| seen.push((done, total)))
        .await
        .unwrap();
    assert_eq!((stored, seen), (1, vec![(1, 1)]));
    assert_eq!(embed.texts_embedded(), 1);
    assert_eq!(
        fx.store
            .memory_stats("ada", MAIN_AGENT)
            .await
            .unwrap()
            .embedded,
        1
    );
}

struct Quiet;
impl ChatSink for Quiet {}

async fn chat(fx: &Fx, server: &FakeLlmServer, memory: Arc<MemoryService>) -> ChatService {
    let provider = build_provider(&server.openai_settings()).unwrap();
    let runner = Arc::new(ToolRunner::new(
        Arc::new(ToolRegistry::new()),
        Arc::new(PolicyGate::new(&Default::default())),
    ));
    let agent = AgentLoop::new(
        provider,
        runner,
        Arc::new(HookRegistry::new()),
        LoopConfig::default(),
    );
    let sessions = Arc::new(SessionManager::new(
        fx.store.clone(),
        fx.clock.clone(),
        20,
        Duration::from_secs(3600),
    ));
    ChatService::new(
        sessions,
        agent,
        ChatSettings {
            agent_name: "test".into(),
            workspace: std::env::temp_dir(),
            timezone: chrono_tz::UTC,
            runtime: RuntimeInfo {
                host: "h".into(),
                os: "o".into(),
            },
            tool_limits: Default::default(),
            approval_timeout: Duration::from_secs(60),
            skill_paths: Vec::new(),
        },
    )
    .with_memory(memory)
}

fn inbound(text: &str) -> Inbound {
    Inbound {
        user_id: "ada".into(),
        channel: "terminal".into(),
        thread: None,
        text: text.into(),
        images: Vec::new(),
    }
}

#[tokio::test]
async fn a_turn_gets_the_memory_context_of_a_relevant_memory_only() {
    let fx = fx().await;
    let server = FakeLlmServer::start().await.unwrap();
    let memory = Arc::new(service(
        &fx,
        MemorySettings {
            auto_save: true,
            ..MemorySettings::default()
        },
    ));
    memory
        .store_memory(
            Some("coffee"),
            "Ada prefers espresso, no sugar",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    let chat = chat(&fx, &server, Arc::clone(&memory)).await;
    server.push(Scripted::text("An espresso, then."));
    server.push(Scripted::text("Sunny."));

    let reply = chat
        .handle(inbound("Which coffee should I order?"), &Quiet)
        .await;
    assert!(matches!(reply, Reply::Answer(_)), "{reply:?}");
    let messages = &server.requests()[0].body["messages"];
    let list = messages.as_array().unwrap();
    let context = &list[list.len() - 2];
    assert_eq!(context["role"], "system");
    assert_eq!(
        context["content"],
        "[Memory context]\n- coffee: Ada prefers espresso, no sugar"
    );
    assert_eq!(
        list[list.len() - 1]["content"],
        "Which coffee should I order?"
    );

    let reply = chat
        .handle(inbound("How is the weather in Oslo?"), &Quiet)
        .await;
    assert!(matches!(reply, Reply::Answer(_)), "{reply:?}");
    let sent = serde_json::to_string(&server.requests()[1].body["messages"]).unwrap();
    assert!(!sent.contains("[Memory context]"), "{sent}");
    // The earlier turn's context is not part of the stored history either.
    assert!(!sent.contains("espresso, no sugar"), "{sent}");
    // Auto-save kept both of the person's messages.
    let saved = fx
        .store
        .list_memories("ada", MAIN_AGENT, Some(MemoryCategory::Conversation), 10)
        .await
        .unwrap();
    assert_eq!(saved.len(), 2);
}

#[tokio::test]
async fn hygiene_archives_purges_and_snapshots_then_a_fresh_store_hydrates() {
    let fx = self::fx().await;
    let workspace = tempfile::tempdir().unwrap();
    let memory = service(&fx, MemorySettings::default());
    let day0 = fx.clock.now();
    memory
        .store_memory(
            Some("coffee"),
            "Prefers espresso",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    memory
        .store_memory(
            None,
            "## Not a heading\nLives in Lyon",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    memory
        .index_daily(day0.date_naive(), "- talked about coffee")
        .await
        .unwrap();
    memory
        .store_memory(None, "hello there", MemoryCategory::Conversation, "chat")
        .await
        .unwrap();

    let settings = HygieneSettings::default();
    let report = run_hygiene(
        &fx.store,
        "ada",
        MAIN_AGENT,
        &settings,
        workspace.path(),
        day0 + chrono::Duration::days(8),
    )
    .await
    .unwrap();
    assert_eq!(
        (report.archived, report.purged, report.purged_conversation),
        (1, 0, 0)
    );
    let report = run_hygiene(
        &fx.store,
        "ada",
        MAIN_AGENT,
        &settings,
        workspace.path(),
        day0 + chrono::Duration::days(31),
    )
    .await
    .unwrap();
    assert_eq!(
        (report.archived, report.purged, report.purged_conversation),
        (0, 1, 1)
    );
    let snapshot = report.snapshot.unwrap();
    assert_eq!(snapshot, workspace.path().join(SNAPSHOT_FILE));
    let core = |s: &Store| {
        let s = s.clone();
        async move {
            let mut docs: Vec<(Option<String>, String)> = s
                .list_memories("ada", MAIN_AGENT, None, 100)
                .await
                .unwrap()
                .into_iter()
                .map(|d| {
                    assert_eq!(d.category, MemoryCategory::Core);
                    (d.key, d.content)
                })
                .collect();
            docs.sort();
            docs
        }
    };
    let before = core(&fx.store).await;
    assert_eq!(before.len(), 2);

    // A new, empty store hydrates the same core memories from the snapshot.
    let fresh = self::fx().await;
    assert_eq!(
        hydrate(
            &fresh.store,
            "ada",
            MAIN_AGENT,
            workspace.path(),
            fresh.clock.now()
        )
        .await
        .unwrap(),
        2
    );
    assert_eq!(core(&fresh.store).await, before);
    // Only an empty store is hydrated.
    assert_eq!(
        hydrate(
            &fresh.store,
            "ada",
            MAIN_AGENT,
            workspace.path(),
            fresh.clock.now()
        )
        .await
        .unwrap(),
        0
    );
    assert_eq!(core(&fresh.store).await.len(), 2);

    // Disabled hygiene does nothing.
    let off = HygieneSettings {
        enabled: false,
        ..HygieneSettings::default()
    };
    let report = run_hygiene(&fx.store, "ada", MAIN_AGENT, &off, workspace.path(), day0)
        .await
        .unwrap();
    assert!(!report.ran);
}

#[tokio::test]
async fn kept_vectors_are_reloaded_after_another_process_writes() {
    let fx = fx().await;
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    let make = || {
        service(&fx, MemorySettings::default())
            .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap())
    };
    let (daemon, cli) = (make(), make());
    daemon
        .store_memory(
            None,
            "Gardening: tomatoes in May",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    daemon.flush().await;
    assert!(
        daemon
            .recall("cello lessons", 5)
            .await
            .unwrap()
            .hits
            .is_empty()
    );
    // Another service on the same database (as `cairn memory add` would be).
    let doc = cli
        .store_memory(None, "Cello lessons on Tuesday", MemoryCategory::Core, "t")
        .await
        .unwrap();
    cli.flush().await;
    let recall = daemon.recall("cello lessons", 5).await.unwrap();
    assert_eq!(recall.hits.len(), 1);
    assert_eq!(recall.hits[0].doc.id, doc.id);
    assert_eq!(recall.hits[0].matched_by, MatchedBy::Both);
    cli.forget(doc.id).await.unwrap();
    assert!(
        daemon
            .recall("cello lessons", 5)
            .await
            .unwrap()
            .hits
            .is_empty()
    );
}

#[tokio::test]
async fn the_compactors_daily_summary_becomes_a_daily_memory() {
    use cairn_agent::session::{Turn, TurnKind, TurnState, TurnUsage};
    use cairn_agent::{CompactionStrategy, Compactor};
    use cairn_llm::ChatMessage;
    use cairn_llm::testing::InstantProvider;

    let fx = fx().await;
    let memory = Arc::new(service(&fx, MemorySettings::default()));
    let workspace = tempfile::tempdir().unwrap();
    let llm = Arc::new(InstantProvider::new());
    llm.push_text("- Ada waters the tomatoes every evening");
    let compactor =
        Compactor::new(llm, workspace.path().to_path_buf()).with_memory(Arc::clone(&memory));
    let at = fx.clock.now();
    let mut turns: Vec<Turn> = (1..=6)
        .map(|n| Turn {
            position: i64::from(n),
            number: n,
            kind: TurnKind::Exchange,
            user_input: format!("question {n}"),
            response: Some(format!("answer {n}")),
            messages: vec![
                ChatMessage::user(format!("question {n}")),
                ChatMessage::assistant(format!("answer {n}")),
            ],
            tool_calls: Vec::new(),
            state: TurnState::Completed,
            started_at: at,
            completed_at: Some(at),
            error: None,
            usage: TurnUsage::default(),
            model: None,
            route: None,
        })
        .collect();
    let result = compactor
        .compact(
            &mut turns,
            CompactionStrategy::Summarize { keep_recent: 2 },
            at,
        )
        .await
        .unwrap();
    assert!(result.summary_written);
    let daily = fx
        .store
        .list_memories("ada", MAIN_AGENT, Some(MemoryCategory::Daily), 10)
        .await
        .unwrap();
    assert_eq!(daily.len(), 1);
    assert_eq!(daily[0].source, "compactor");
    assert!(daily[0].content.contains("2026-11-21"));
    assert!(daily[0].content.contains("waters the tomatoes"));
    let recall = memory.recall("tomatoes", 5).await.unwrap();
    assert_eq!(recall.hits[0].doc.id, daily[0].id);
}

/// Two agents over one store: each recalls its own memories, by words and
/// by meaning, and the ones any agent shared; never the other's private ones.
#[tokio::test]
async fn each_agent_recalls_its_own_memories_and_the_shared_ones() {
    let fx = fx().await;
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    let main = service(
        &fx,
        MemorySettings {
            min_relevance: 0.0,
            ..MemorySettings::default()
        },
    )
    .with_embeddings(EmbeddingsClient::new(&embed.settings(None)).unwrap());
    let family = main.for_agent("family");
    assert_eq!((main.agent(), family.agent()), (MAIN_AGENT, "family"));

    let words = family
        .store_memory(
            None,
            "Dentist appointment on Friday",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    // Near "dentist appointment" by meaning only (the fake's four-letter stem).
    let meaning = family
        .store_memory(
            None,
            "The dentists of Lyon are expensive",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    family.flush().await;
    assert_eq!((words.agent.as_str(), words.shared), ("family", false));

    let recall = main.recall("dentist appointment", 10).await.unwrap();
    assert_eq!(recall.mode, RecallMode::Hybrid);
    assert!(recall.hits.is_empty(), "{recall:#?}");
    // Right after main's recall, with no write between: family's vectors
    // are its own, not main's kept ones.
    let mut theirs: Vec<_> = family
        .recall("dentist appointment", 10)
        .await
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.doc.id, h.matched_by))
        .collect();
    theirs.sort_by_key(|h| h.0);
    let mut expected = vec![(words.id, MatchedBy::Both), (meaning.id, MatchedBy::Vector)];
    expected.sort_by_key(|h| h.0);
    assert_eq!(theirs, expected);

    let shared = family
        .store_memory_shared(
            Some("dentist"),
            "Dentist on call: Dr Weiss",
            MemoryCategory::Core,
            "t",
            true,
        )
        .await
        .unwrap();
    family.flush().await;
    let recall = main.recall("dentist appointment", 10).await.unwrap();
    assert_eq!(
        recall.hits.iter().map(|h| h.doc.id).collect::<Vec<_>>(),
        vec![shared.id],
        "{recall:#?}"
    );
    assert_eq!(main.list(None, 10).await.unwrap().len(), 1);
    assert_eq!(main.stats().await.unwrap().total, 1);

    // Still family's: main can neither forget it nor replace its key.
    assert!(!main.forget(shared.id).await.unwrap());
    assert!(!main.forget_key("dentist").await.unwrap());
    let ours = main
        .store_memory(
            Some("dentist"),
            "Main's dentist: Dr Roux",
            MemoryCategory::Core,
            "t",
        )
        .await
        .unwrap();
    assert_ne!(ours.id, shared.id);
    assert_eq!(
        fx.store
            .get_memory(shared.id)
            .await
            .unwrap()
            .unwrap()
            .content,
        "Dentist on call: Dr Weiss"
    );

    // Each snapshot holds its own agent's core memories only.
    let now = fx.clock.now();
    let snap = export_snapshot(&fx.store, "ada", MAIN_AGENT, now)
        .await
        .unwrap();
    assert!(
        snap.contains("Dr Roux") && !snap.contains("Dr Weiss"),
        "{snap}"
    );
    let snap = export_snapshot(&fx.store, "ada", "family", now)
        .await
        .unwrap();
    assert!(
        snap.contains("Dr Weiss") && !snap.contains("Dr Roux"),
        "{snap}"
    );
    assert!(family.forget(shared.id).await.unwrap());
}
