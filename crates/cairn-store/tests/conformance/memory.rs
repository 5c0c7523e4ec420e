//! Memory documents: store, keyword search (accents folded), forget, embeddings, hygiene.

use cairn_store::{MemoryCategory, NewMemory, content_hash};
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::fixture::Fixture;

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, 9, 0, 0).unwrap()
}

pub fn memo(user: &str, key: Option<&str>, content: &str, category: MemoryCategory) -> NewMemory {
    NewMemory {
        user_id: user.to_string(),
        key: key.map(str::to_string),
        content: content.to_string(),
        category,
        source: "test".to_string(),
    }
}

pub async fn memories_store_update_and_forget(fx: &Fixture) {
    let s = &fx.store;
    let doc = s
        .store_memory(
            &memo(
                "u",
                Some("coffee"),
                "Prefers espresso",
                MemoryCategory::Core,
            ),
            at(1),
        )
        .await
        .unwrap();
    assert_eq!(doc.key.as_deref(), Some("coffee"));
    assert_eq!(doc.category, MemoryCategory::Core);
    assert_eq!(doc.content_hash, content_hash("Prefers espresso"));
    assert_eq!(s.get_memory(doc.id).await.unwrap(), Some(doc.clone()));

    // The same key replaces the content of the same document.
    s.set_memory_embedding(doc.id, &doc.content_hash, "m", &[1.0, 0.0])
        .await
        .unwrap();
    let again = s
        .store_memory(
            &memo(
                "u",
                Some("coffee"),
                "Prefers flat white",
                MemoryCategory::Core,
            ),
            at(2),
        )
        .await
        .unwrap();
    assert_eq!(again.id, doc.id);
    assert_eq!(again.content, "Prefers flat white");
    assert_eq!(again.created_at, at(1));
    assert_eq!(again.updated_at, at(2));
    // The vector described the old text, so it went.
    assert_eq!(again.embedding_model, None);
    assert_eq!(s.memory_embedding(doc.id).await.unwrap(), None);
    // The same key for another person is another document.
    let other = s
        .store_memory(
            &memo("v", Some("coffee"), "Tea", MemoryCategory::Core),
            at(2),
        )
        .await
        .unwrap();
    assert_ne!(other.id, doc.id);

    let updated = s
        .update_memory(doc.id, "Prefers cortado", at(3))
        .await
        .unwrap();
    assert_eq!(updated.content, "Prefers cortado");
    assert_eq!(
        s.get_memory_by_key("u", "coffee")
            .await
            .unwrap()
            .unwrap()
            .id,
        doc.id
    );
    assert_eq!(s.count_memories("u").await.unwrap(), 1);

    assert!(s.forget_memory(doc.id).await.unwrap());
    assert!(!s.forget_memory(doc.id).await.unwrap());
    assert!(
        s.search_memories("u", "cortado", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(s.forget_memory_by_key("v", "coffee").await.unwrap());
    assert!(!s.forget_memory_by_key("v", "coffee").await.unwrap());
    assert_eq!(s.count_memories("v").await.unwrap(), 0);
}

pub async fn memory_keyword_search_folds_accents(fx: &Fixture) {
    let s = &fx.store;
    s.store_memory(
        &memo(
            "u",
            None,
            "Réunion d'équipe le lundi à 10h",
            MemoryCategory::Custom,
        ),
        at(1),
    )
    .await
    .unwrap();
    s.store_memory(
        &memo(
            "u",
            None,
            "The reunion dinner is in Lyon",
            MemoryCategory::Custom,
        ),
        at(1),
    )
    .await
    .unwrap();
    s.store_memory(
        &memo(
            "u",
            None,
            "Dentist appointment on Friday",
            MemoryCategory::Custom,
        ),
        at(1),
    )
    .await
    .unwrap();
    s.store_memory(
        &memo("someone-else", None, "reunion", MemoryCategory::Core),
        at(1),
    )
    .await
    .unwrap();

    // Without the accent, the accented document is found, and vice versa.
    let hits = s.search_memories("u", "reunion", 10).await.unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().any(|h| h.doc.content.starts_with("Réunion")));
    assert!(hits.iter().all(|h| h.score == 1.0));
    let hits = s.search_memories("u", "RÉUNION équipe", 10).await.unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0].doc.content.starts_with("Réunion"));
    assert_eq!(hits[0].score, 1.0);
    assert_eq!(hits[1].score, 0.5_f64.sqrt());

    // Whole words only, stop words ignored, limit honoured.
    assert!(s.search_memories("u", "dent", 10).await.unwrap().is_empty());
    assert!(
        s.search_memories("u", "the is on", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(s.search_memories("u", "reunion", 1).await.unwrap().len(), 1);
    // Terms are data, never query syntax.
    assert!(
        s.search_memories("u", "\"') OR * NEAR(", 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A changed content is searched by its new words only.
    let doc = s.search_memories("u", "dentist", 1).await.unwrap()[0]
        .doc
        .clone();
    s.update_memory(doc.id, "Physiotherapy on Friday", at(2))
        .await
        .unwrap();
    assert!(
        s.search_memories("u", "dentist", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.search_memories("u", "physiotherapy", 5)
            .await
            .unwrap()
            .len(),
        1
    );
    // The key is searchable too.
    s.store_memory(
        &memo("u", Some("partner name"), "Alex", MemoryCategory::Core),
        at(2),
    )
    .await
    .unwrap();
    assert_eq!(s.search_memories("u", "partner", 5).await.unwrap().len(), 1);
}

pub async fn memory_embeddings_and_cache(fx: &Fixture) {
    let s = &fx.store;
    let a = s
        .store_memory(&memo("u", None, "alpha", MemoryCategory::Core), at(1))
        .await
        .unwrap();
    let b = s
        .store_memory(&memo("u", None, "beta", MemoryCategory::Daily), at(1))
        .await
        .unwrap();
    assert!(
        s.set_memory_embedding(a.id, &a.content_hash, "m1", &[0.6, 0.8])
            .await
            .unwrap()
    );
    // A stale hash (the content changed meanwhile) stores nothing.
    assert!(
        !s.set_memory_embedding(b.id, "stale", "m1", &[1.0, 0.0])
            .await
            .unwrap()
    );
    assert_eq!(
        s.memory_embedding(a.id).await.unwrap(),
        Some(("m1".to_string(), vec![0.6, 0.8]))
    );
    assert_eq!(
        s.memory_vectors("u", "m1").await.unwrap(),
        vec![(a.id, vec![0.6, 0.8])]
    );
    assert!(s.memory_vectors("u", "m2").await.unwrap().is_empty());
    // Every write that changes the recallable vectors moves the generation on.
    let g0 = s.memory_generation().await.unwrap();
    s.touch_memories(&[a.id], at(2)).await.unwrap();
    assert_eq!(
        s.memory_generation().await.unwrap(),
        g0,
        "touching is not a change"
    );
    s.set_memory_embedding(b.id, &b.content_hash, "m1", &[0.0, 1.0])
        .await
        .unwrap();
    let g1 = s.memory_generation().await.unwrap();
    assert!(g1 > g0);
    assert!(!s.forget_memory(uuid::Uuid::nil()).await.unwrap());
    assert_eq!(s.memory_generation().await.unwrap(), g1);
    s.update_memory(b.id, "beta two", at(2)).await.unwrap();
    assert!(s.memory_generation().await.unwrap() > g1);
    let stats = s.memory_stats("u").await.unwrap();
    assert_eq!(stats.total, 2);
    assert_eq!(stats.embedded, 1);
    assert_eq!(
        stats.by_category,
        vec![(MemoryCategory::Core, 1), (MemoryCategory::Daily, 1)]
    );

    assert_eq!(s.cached_embedding("h", "m1").await.unwrap(), None);
    s.cache_embedding("h", "m1", &[0.25, -0.5], at(1))
        .await
        .unwrap();
    s.cache_embedding("h", "m1", &[9.0], at(2)).await.unwrap();
    assert_eq!(
        s.cached_embedding("h", "m1").await.unwrap(),
        Some(vec![0.25, -0.5])
    );
    assert_eq!(s.cached_embedding("h", "m2").await.unwrap(), None);

    let listed = s
        .list_memories("u", Some(MemoryCategory::Daily), 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, b.id);
    assert_eq!(s.list_memories("u", None, 10).await.unwrap().len(), 2);
    s.touch_memories(&[a.id], at(3)).await.unwrap();
    assert_eq!(
        s.get_memory(a.id).await.unwrap().unwrap().accessed_at,
        Some(at(3))
    );
    assert_eq!(
        s.memories_by_ids(&[b.id, a.id])
            .await
            .unwrap()
            .iter()
            .map(|d| d.id)
            .collect::<Vec<_>>(),
        vec![b.id, a.id]
    );
}

pub async fn memory_hygiene_never_touches_core(fx: &Fixture) {
    let s = &fx.store;
    let old = at(1);
    let now = at(20);
    for (content, category) in [
        ("old core", MemoryCategory::Core),
        ("old daily", MemoryCategory::Daily),
        ("old conversation", MemoryCategory::Conversation),
        ("old custom", MemoryCategory::Custom),
    ] {
        s.store_memory(&memo("u", None, content, category), old)
            .await
            .unwrap();
    }
    s.store_memory(&memo("u", None, "new daily", MemoryCategory::Daily), now)
        .await
        .unwrap();

    let cutoff = now - Duration::days(7);
    let moved = s
        .archive_memories_older_than("u", &[MemoryCategory::Core, MemoryCategory::Daily], cutoff)
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let archived = s
        .list_memories("u", Some(MemoryCategory::Archived), 10)
        .await
        .unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].content, "old daily");
    // Archived documents are not recalled.
    assert!(
        s.search_memories("u", "daily", 10)
            .await
            .unwrap()
            .iter()
            .all(|h| h.doc.content == "new daily")
    );

    assert_eq!(
        s.purge_memories_older_than("u", MemoryCategory::Core, now)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        s.purge_memories_older_than("u", MemoryCategory::Conversation, cutoff)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.purge_memories_older_than("u", MemoryCategory::Archived, cutoff)
            .await
            .unwrap(),
        1
    );
    let left: Vec<String> = s
        .list_memories("u", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.content)
        .collect();
    assert_eq!(left, ["new daily", "old custom", "old core"]);
}
