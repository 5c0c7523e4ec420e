//! The memory tools (`memory_store`, `memory_recall`, `memory_forget`) the
//! way the agent reaches them: through the tool runner and its policy, over
//! a real SQLite store (and the fake embeddings server for hybrid recall).
#![expect(clippy::unwrap_used, reason = "test code unwraps freely")]

mod support;

use std::sync::Arc;

use cairn_agent::memory::tools::memory_tools;
use cairn_agent::memory::{MemoryService, MemorySettings};
use cairn_agent::policy::{AutonomyLevel, PolicyGate, ToolPolicyConfig};
use cairn_agent::runner::{Approver, AutoApprove, DenyAll, ToolRunner, ToolStatus};
use cairn_agent::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use cairn_core::clock::FixedClock;
use cairn_llm::EmbeddingsClient;
use cairn_llm::testing::FakeEmbeddingsServer;
use cairn_store::{MAIN_AGENT, MemoryCategory, Store};
use chrono::{TimeZone, Utc};
use serde_json::{Value, json};
use support::{call, decode};

struct Fx {
    store: Store,
    memory: Arc<MemoryService>,
    runner: ToolRunner,
    _db: tempfile::TempDir,
}

async fn fx(autonomy: AutonomyLevel, embeddings: Option<&FakeEmbeddingsServer>) -> Fx {
    let db = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(&format!("sqlite://{}/cairn.db", db.path().display()))
        .await
        .unwrap();
    let clock = Arc::new(FixedClock::new(
        Utc.with_ymd_and_hms(2026, 11, 21, 9, 0, 0).unwrap(),
    ));
    let mut memory = MemoryService::new(
        store.clone(),
        "ada",
        clock,
        MemorySettings {
            min_relevance: 0.0,
            ..MemorySettings::default()
        },
    );
    if let Some(server) = embeddings {
        memory = memory.with_embeddings(EmbeddingsClient::new(&server.settings(None)).unwrap());
    }
    let memory = Arc::new(memory);
    let mut registry = ToolRegistry::new();
    for tool in memory_tools(Arc::clone(&memory)) {
        registry.register(tool).unwrap();
    }
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy,
        ..ToolPolicyConfig::default()
    });
    Fx {
        store,
        memory,
        runner: ToolRunner::new(Arc::new(registry), Arc::new(policy)),
        _db: db,
    }
}

impl Fx {
    async fn run_with(
        &self,
        name: &str,
        args: Value,
        approver: &dyn Approver,
    ) -> (ToolStatus, String) {
        let ctx = ToolContext::new(std::env::temp_dir(), "session-1");
        let result = self.runner.run(&call(name, args), &ctx, approver).await;
        (result.status, result.content)
    }

    /// The tool's own outcome, run approved.
    async fn run(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let ctx = ToolContext::new(std::env::temp_dir(), "session-1");
        decode(&self.runner.run(&call(name, args), &ctx, &AutoApprove).await)
    }

    /// How many memories ada has.
    async fn stored(&self) -> usize {
        self.store
            .list_memories("ada", MAIN_AGENT, None, 100)
            .await
            .unwrap()
            .len()
    }

    async fn ok(&self, name: &str, args: Value) -> String {
        let output = self.run(name, args.clone()).await.unwrap();
        assert!(output.success, "{name} {args}: {}", output.content);
        output.content
    }
}

/// The `id …` a recall line names.
fn ids_in(recall: &str) -> Vec<String> {
    recall
        .split("(id ")
        .skip(1)
        .map(|rest| rest.split(',').next().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn store_recall_replace_and_forget_by_key_and_by_id() {
    let fx = fx(AutonomyLevel::Full, None).await;
    let stored = fx
        .ok(
            "memory_store",
            json!({"content": "Prefers espresso, no sugar", "key": " coffee "}),
        )
        .await;
    assert!(stored.starts_with("Remembered (core, id "), "{stored}");
    assert!(stored.ends_with(", key \"coffee\")."), "{stored}");
    fx.ok(
        "memory_store",
        json!({"content": "Dentist on Friday at 10", "category": "daily"}),
    )
    .await;

    let recall = fx.ok("memory_recall", json!({"query": "coffee"})).await;
    assert!(recall.starts_with("mode: keyword_only ("), "{recall}");
    assert!(
        recall.contains("keyword] coffee: Prefers espresso, no sugar (id "),
        "{recall}"
    );
    assert!(recall.ends_with(", core)"), "{recall}");
    assert!(!recall.contains("Dentist"), "{recall}");

    // The same key again replaces the content.
    fx.ok(
        "memory_store",
        json!({"content": "Now drinks tea", "key": "coffee"}),
    )
    .await;
    let recall = fx.ok("memory_recall", json!({"query": "coffee tea"})).await;
    assert!(recall.contains("coffee: Now drinks tea"), "{recall}");
    assert!(!recall.contains("espresso"), "{recall}");
    assert_eq!(fx.stored().await, 2);

    assert_eq!(
        fx.ok("memory_forget", json!({"key": "coffee"})).await,
        "Forgotten."
    );
    let again = fx
        .run("memory_forget", json!({"key": "coffee"}))
        .await
        .unwrap();
    assert_eq!(
        (again.success, again.content.as_str()),
        (false, "No such memory.")
    );

    let recall = fx
        .ok("memory_recall", json!({"query": "dentist", "limit": 500}))
        .await;
    let ids = ids_in(&recall);
    assert_eq!(ids.len(), 1, "{recall}");
    assert!(recall.ends_with(", daily)"), "{recall}");
    assert_eq!(
        fx.ok("memory_forget", json!({"id": ids[0]})).await,
        "Forgotten."
    );
    let recall = fx.ok("memory_recall", json!({"query": "dentist"})).await;
    assert!(
        recall.ends_with("\nNothing relevant remembered."),
        "{recall}"
    );
    assert_eq!(fx.stored().await, 0);
}

#[tokio::test]
async fn another_persons_memory_cannot_be_forgotten_by_id() {
    let fx = fx(AutonomyLevel::Full, None).await;
    let clock = Arc::new(FixedClock::new(Utc::now()));
    let bob = MemoryService::new(fx.store.clone(), "bob", clock, MemorySettings::default());
    let his = bob
        .store_memory(None, "Bob's locker code is 1234", MemoryCategory::Core, "t")
        .await
        .unwrap();
    let out = fx
        .run("memory_forget", json!({"id": his.id.to_string()}))
        .await
        .unwrap();
    assert_eq!(
        (out.success, out.content.as_str()),
        (false, "No such memory.")
    );
    assert!(fx.store.get_memory(his.id).await.unwrap().is_some());
    // Nor recalled.
    let recall = fx
        .ok("memory_recall", json!({"query": "locker code"}))
        .await;
    assert!(!recall.contains("1234"), "{recall}");
}

#[tokio::test]
async fn bad_arguments_are_named() {
    let fx = fx(AutonomyLevel::Full, None).await;
    let invalid = |result: Result<ToolOutput, ToolError>| match result {
        Err(ToolError::InvalidArguments(message)) => message,
        other => panic!("expected invalid arguments, got {other:?}"),
    };
    let message = invalid(fx.run("memory_store", json!({"content": "  "})).await);
    assert_eq!(message, "`content` is empty");
    for category in ["archived", "work"] {
        let message = invalid(
            fx.run(
                "memory_store",
                json!({"content": "x", "category": category}),
            )
            .await,
        );
        assert_eq!(
            message,
            format!("unknown category `{category}`; use core, daily, conversation or custom")
        );
    }
    let message = invalid(fx.run("memory_forget", json!({"id": "not-a-uuid"})).await);
    assert_eq!(message, "`not-a-uuid` is not a memory id");
    for args in [
        json!({}),
        json!({"id": uuid::Uuid::nil().to_string(), "key": "k"}),
    ] {
        let message = invalid(fx.run("memory_forget", args).await);
        assert_eq!(message, "give exactly one of `id` or `key`");
    }
    let (status, _) = fx
        .run_with("memory_recall", json!({"limit": 3}), &AutoApprove)
        .await;
    assert_eq!(status, ToolStatus::InvalidArguments);
    assert_eq!(fx.stored().await, 0);
}

#[tokio::test]
async fn writes_ask_first_and_aliases_reach_the_same_tools() {
    let fx = fx(AutonomyLevel::Supervised, None).await;
    // Storing and forgetting are writes: declined, nothing changes.
    let (status, _) = fx
        .run_with("memory_store", json!({"content": "secret plan"}), &DenyAll)
        .await;
    assert_eq!(status, ToolStatus::Declined);
    assert_eq!(fx.stored().await, 0);
    let (status, content) = fx
        .run_with(
            "memory_save",
            json!({"content": "likes hiking", "key": "hobby"}),
            &AutoApprove,
        )
        .await;
    assert_eq!(status, ToolStatus::Success, "{content}");
    let (status, _) = fx
        .run_with("forget", json!({"key": "hobby"}), &DenyAll)
        .await;
    assert_eq!(status, ToolStatus::Declined);
    // Recall only reads: it runs without asking.
    let (status, content) = fx
        .run_with("recall", json!({"query": "hiking"}), &DenyAll)
        .await;
    assert_eq!(status, ToolStatus::Success, "{content}");
    assert!(content.contains("hobby: likes hiking"), "{content}");
}

#[tokio::test]
async fn with_embeddings_recall_is_hybrid_and_says_how_each_hit_matched() {
    let embed = FakeEmbeddingsServer::start().await.unwrap();
    let fx = fx(AutonomyLevel::Full, Some(&embed)).await;
    fx.ok(
        "memory_store",
        json!({"content": "Dentist appointment on Friday"}),
    )
    .await;
    fx.ok(
        "memory_store",
        json!({"content": "The dentists of Lyon are expensive"}),
    )
    .await;
    fx.memory.flush().await;
    let recall = fx
        .ok(
            "memory_recall",
            json!({"query": "dentist appointment", "limit": 1}),
        )
        .await;
    assert!(recall.starts_with("mode: hybrid\n- ["), "{recall}");
    assert!(
        recall.contains(" both] Dentist appointment on Friday"),
        "{recall}"
    );
    assert_eq!(ids_in(&recall).len(), 1, "the limit holds: {recall}");
    assert_eq!(embed.texts_embedded(), 3, "two documents and the query");
}

/// The acceptance: what `family` stores is not found by `main`'s
/// `memory_recall`; what it stores with `shared` is, and stays family's.
#[tokio::test]
async fn memory_stored_by_family_is_recalled_by_main_only_when_shared() {
    let main = fx(AutonomyLevel::Full, None).await;
    let family_memory = Arc::new(main.memory.for_agent("family"));
    let mut registry = ToolRegistry::new();
    for tool in memory_tools(Arc::clone(&family_memory)) {
        registry.register(tool).unwrap();
    }
    let policy = PolicyGate::new(&ToolPolicyConfig {
        autonomy: AutonomyLevel::Full,
        ..ToolPolicyConfig::default()
    });
    let family = Fx {
        store: main.store.clone(),
        memory: family_memory,
        runner: ToolRunner::new(Arc::new(registry), Arc::new(policy)),
        _db: tempfile::tempdir().unwrap(),
    };

    let out = family
        .ok(
            "memory_store",
            json!({"content": "Grandma's birthday is 3 May", "key": "grandma"}),
        )
        .await;
    assert!(!out.contains("shared"), "{out}");
    let recall = main
        .ok("memory_recall", json!({"query": "grandma birthday"}))
        .await;
    assert!(
        recall.ends_with("\nNothing relevant remembered."),
        "{recall}"
    );
    assert!(
        family
            .ok("memory_recall", json!({"query": "grandma birthday"}))
            .await
            .contains("3 May")
    );

    let out = family
        .ok(
            "memory_store",
            json!({"content": "The wifi password is hunter2", "key": "wifi", "shared": true}),
        )
        .await;
    assert!(out.ends_with(", shared with every agent)."), "{out}");
    let recall = main
        .ok("memory_recall", json!({"query": "wifi password"}))
        .await;
    assert!(recall.contains("hunter2"), "{recall}");
    assert!(recall.contains("shared by agent family"), "{recall}");
    assert!(!recall.contains("3 May"), "{recall}");

    // Family's to forget, not main's.
    let out = main
        .run("memory_forget", json!({"key": "wifi"}))
        .await
        .unwrap();
    assert_eq!(
        (out.success, out.content.as_str()),
        (false, "No such memory.")
    );
    family.ok("memory_forget", json!({"key": "wifi"})).await;
    let recall = main
        .ok("memory_recall", json!({"query": "wifi password"}))
        .await;
    assert!(!recall.contains("hunter2"), "{recall}");

    // A `shared` that is not a boolean is refused.
    let err = family
        .run("memory_store", json!({"content": "x", "shared": "yes"}))
        .await;
    assert!(
        matches!(err, Err(ToolError::InvalidArguments(_))),
        "{err:?}"
    );
}
