//! Memory documents: store, keyword search (accents folded), forget,
//! embeddings, hygiene; each agent's own, and the shared ones.

use cairn_store::{MAIN_AGENT, MemoryCategory, NewMemory, content_hash};
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::fixture::Fixture;

fn at(day: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, day, 9, 0, 0).unwrap()
}

pub fn memo(user: &str, key: Option<&str>, content: &str, category: MemoryCategory) -> NewMemory {
    NewMemory {
        user_id: user.to_string(),
        agent: MAIN_AGENT.to_string(),
        key: key.map(str::to_string),
        content: content.to_string(),
        category,
        source: "test".to_string(),
        shared: false,
    }
}

/// A document `agent` stores, shared or not.
fn memo_of(agent: &str, key: Option<&str>, content: &str, shared: bool) -> NewMemory {
    NewMemory {
        agent: agent.to_string(),
        shared,
        ..memo("u", key, content, MemoryCategory::Core)
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
        s.get_memory_by_key("u", MAIN_AGENT, "coffee")
            .await
            .unwrap()
            .unwrap()
            .id,
        doc.id
    );
    assert_eq!(s.count_memories("u", MAIN_AGENT).await.unwrap(), 1);

    assert!(s.forget_memory(doc.id).await.unwrap());
    assert!(!s.forget_memory(doc.id).await.unwrap());
    assert!(
        s.search_memories("u", MAIN_AGENT, "cortado", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.forget_memory_by_key("v", MAIN_AGENT, "coffee")
            .await
            .unwrap()
    );
    assert!(
        !s.forget_memory_by_key("v", MAIN_AGENT, "coffee")
            .await
            .unwrap()
    );
    assert_eq!(s.count_memories("v", MAIN_AGENT).await.unwrap(), 0);
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
    let hits = s
        .search_memories("u", MAIN_AGENT, "reunion", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().any(|h| h.doc.content.starts_with("Réunion")));
    assert!(hits.iter().all(|h| h.score == 1.0));
    let hits = s
        .search_memories("u", MAIN_AGENT, "RÉUNION équipe", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits[0].doc.content.starts_with("Réunion"));
    assert_eq!(hits[0].score, 1.0);
    assert_eq!(hits[1].score, 0.5_f64.sqrt());

    // Whole words only, stop words ignored, limit honoured.
    assert!(
        s.search_memories("u", MAIN_AGENT, "dent", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        s.search_memories("u", MAIN_AGENT, "the is on", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.search_memories("u", MAIN_AGENT, "reunion", 1)
            .await
            .unwrap()
            .len(),
        1
    );
    // Terms are data, never query syntax.
    assert!(
        s.search_memories("u", MAIN_AGENT, "\"') OR * NEAR(", 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A changed content is searched by its new words only.
    let doc = s
        .search_memories("u", MAIN_AGENT, "dentist", 1)
        .await
        .unwrap()[0]
        .doc
        .clone();
    s.update_memory(doc.id, "Physiotherapy on Friday", at(2))
        .await
        .unwrap();
    assert!(
        s.search_memories("u", MAIN_AGENT, "dentist", 5)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        s.search_memories("u", MAIN_AGENT, "physiotherapy", 5)
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
    assert_eq!(
        s.search_memories("u", MAIN_AGENT, "partner", 5)
            .await
            .unwrap()
            .len(),
        1
    );
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
        s.memory_vectors("u", MAIN_AGENT, "m1").await.unwrap(),
        vec![(a.id, vec![0.6, 0.8])]
    );
    assert!(
        s.memory_vectors("u", MAIN_AGENT, "m2")
            .await
            .unwrap()
            .is_empty()
    );
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
    let stats = s.memory_stats("u", MAIN_AGENT).await.unwrap();
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
        .list_memories("u", MAIN_AGENT, Some(MemoryCategory::Daily), 10)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, b.id);
    assert_eq!(
        s.list_memories("u", MAIN_AGENT, None, 10)
            .await
            .unwrap()
            .len(),
        2
    );
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
        .archive_memories_older_than(
            "u",
            MAIN_AGENT,
            &[MemoryCategory::Core, MemoryCategory::Daily],
            cutoff,
        )
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let archived = s
        .list_memories("u", MAIN_AGENT, Some(MemoryCategory::Archived), 10)
        .await
        .unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].content, "old daily");
    // Archived documents are not recalled.
    assert!(
        s.search_memories("u", MAIN_AGENT, "daily", 10)
            .await
            .unwrap()
            .iter()
            .all(|h| h.doc.content == "new daily")
    );

    assert_eq!(
        s.purge_memories_older_than("u", MAIN_AGENT, MemoryCategory::Core, now)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        s.purge_memories_older_than("u", MAIN_AGENT, MemoryCategory::Conversation, cutoff)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.purge_memories_older_than("u", MAIN_AGENT, MemoryCategory::Archived, cutoff)
            .await
            .unwrap(),
        1
    );
    let left: Vec<String> = s
        .list_memories("u", MAIN_AGENT, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.content)
        .collect();
    assert_eq!(left, ["new daily", "old custom", "old core"]);
}

/// Each agent sees its own documents and the shared ones, by words, by
/// meaning, by key and in lists; never another agent's private ones.
pub async fn memory_is_each_agents_own_unless_shared(fx: &Fixture) {
    let s = &fx.store;
    let private = s
        .store_memory(
            &memo_of("family", Some("locker"), "Locker code 4711", false),
            at(1),
        )
        .await
        .unwrap();
    let shared = s
        .store_memory(
            &memo_of("family", Some("wifi"), "Wifi password hunter2", true),
            at(1),
        )
        .await
        .unwrap();
    assert_eq!((private.agent.as_str(), private.shared), ("family", false));
    assert_eq!((shared.agent.as_str(), shared.shared), ("family", true));
    for doc in [&private, &shared] {
        s.set_memory_embedding(doc.id, &doc.content_hash, "m", &[1.0, 0.0])
            .await
            .unwrap();
    }

    let found = |hits: Vec<cairn_store::KeywordHit>| -> Vec<uuid::Uuid> {
        hits.into_iter().map(|h| h.doc.id).collect()
    };
    // `main` finds the shared one, never the private one.
    assert_eq!(
        found(
            s.search_memories("u", MAIN_AGENT, "locker code wifi password", 10)
                .await
                .unwrap()
        ),
        vec![shared.id]
    );
    assert_eq!(
        s.memory_vectors("u", MAIN_AGENT, "m").await.unwrap(),
        vec![(shared.id, vec![1.0, 0.0])]
    );
    assert_eq!(
        s.get_memory_by_key("u", MAIN_AGENT, "locker")
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        s.get_memory_by_key("u", MAIN_AGENT, "wifi")
            .await
            .unwrap()
            .map(|d| d.id),
        Some(shared.id)
    );
    let listed: Vec<_> = s
        .list_memories("u", MAIN_AGENT, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(listed, vec![shared.id]);
    assert_eq!(s.memory_stats("u", MAIN_AGENT).await.unwrap().total, 1);
    // `family` finds both.
    let mut own = found(
        s.search_memories("u", "family", "locker code wifi password", 10)
            .await
            .unwrap(),
    );
    own.sort();
    let mut both = vec![private.id, shared.id];
    both.sort();
    assert_eq!(own, both);
    assert_eq!(s.memory_vectors("u", "family", "m").await.unwrap().len(), 2);
    assert_eq!(
        s.get_memory_by_key("u", "family", "locker")
            .await
            .unwrap()
            .map(|d| d.id),
        Some(private.id)
    );
    assert_eq!(s.memory_stats("u", "family").await.unwrap().total, 2);
    // Owned documents are counted, not the ones shared by others.
    assert_eq!(s.count_memories("u", MAIN_AGENT).await.unwrap(), 0);
    assert_eq!(s.count_memories("u", "family").await.unwrap(), 2);

    // A shared document is still its agent's: `main` cannot forget it by key.
    assert!(
        !s.forget_memory_by_key("u", MAIN_AGENT, "wifi")
            .await
            .unwrap()
    );
    assert!(s.get_memory(shared.id).await.unwrap().is_some());
    // Storing it again without `shared` makes it private again.
    let unshared = s
        .store_memory(
            &memo_of("family", Some("wifi"), "Wifi password hunter3", false),
            at(2),
        )
        .await
        .unwrap();
    assert_eq!((unshared.id, unshared.shared), (shared.id, false));
    assert!(
        s.search_memories("u", MAIN_AGENT, "wifi", 10)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The same key in two agents is two documents; an agent's own one comes
/// before another's shared one.
pub async fn memory_keys_are_per_agent(fx: &Fixture) {
    let s = &fx.store;
    let theirs = s
        .store_memory(
            &memo_of("family", Some("coffee"), "Family likes tea", true),
            at(1),
        )
        .await
        .unwrap();
    let ours = s
        .store_memory(
            &memo_of(MAIN_AGENT, Some("coffee"), "Main likes espresso", false),
            at(2),
        )
        .await
        .unwrap();
    assert_ne!(theirs.id, ours.id);
    assert_eq!(
        s.get_memory_by_key("u", MAIN_AGENT, "coffee")
            .await
            .unwrap()
            .map(|d| d.id),
        Some(ours.id)
    );
    assert_eq!(
        s.get_memory_by_key("u", "family", "coffee")
            .await
            .unwrap()
            .map(|d| d.id),
        Some(theirs.id)
    );
    // Storing the key again replaces only the storing agent's document.
    let again = s
        .store_memory(
            &memo_of(MAIN_AGENT, Some("coffee"), "Main likes cortado", false),
            at(3),
        )
        .await
        .unwrap();
    assert_eq!(again.id, ours.id);
    assert_eq!(
        s.get_memory(theirs.id).await.unwrap().map(|d| d.content),
        Some("Family likes tea".to_string())
    );
    assert!(
        s.forget_memory_by_key("u", MAIN_AGENT, "coffee")
            .await
            .unwrap()
    );
    assert!(s.get_memory(theirs.id).await.unwrap().is_some());
    assert!(
        s.forget_memory_by_key("u", "family", "coffee")
            .await
            .unwrap()
    );
    assert!(s.get_memory(theirs.id).await.unwrap().is_none());
}

/// Hygiene archives and purges the agent's own documents only, shared ones
/// of other agents included.
pub async fn memory_hygiene_is_per_agent(fx: &Fixture) {
    let s = &fx.store;
    let old = at(1);
    for (agent, shared) in [("family", false), ("family", true), (MAIN_AGENT, false)] {
        for category in [MemoryCategory::Daily, MemoryCategory::Conversation] {
            s.store_memory(
                &NewMemory {
                    category,
                    ..memo_of(agent, None, &format!("{agent} {shared} {category}"), shared)
                },
                old,
            )
            .await
            .unwrap();
        }
    }
    let now = at(20);
    let cutoff = now - Duration::days(7);
    assert_eq!(
        s.archive_memories_older_than("u", MAIN_AGENT, &[MemoryCategory::Daily], cutoff)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        s.purge_memories_older_than("u", MAIN_AGENT, MemoryCategory::Conversation, cutoff)
            .await
            .unwrap(),
        1
    );
    let family: Vec<MemoryCategory> = s
        .list_memories("u", "family", None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.category)
        .collect();
    assert_eq!(family.len(), 4, "family's documents are all still there");
    assert!(!family.contains(&MemoryCategory::Archived));
    assert_eq!(
        s.purge_memories_older_than("u", "family", MemoryCategory::Conversation, cutoff)
            .await
            .unwrap(),
        2
    );
}

/// Documents stored before there were agents are `main`'s, private, and
/// their keys stay unique per agent.
pub async fn old_memories_belong_to_main(fx: &Fixture) {
    let old = fx.sibling().await;
    old.store.migrate_up_to(23).await.unwrap();
    let raw = sqlx::AnyPool::connect(&old.url).await.unwrap();
    let id = uuid::Uuid::now_v7();
    sqlx::query(
        "INSERT INTO memory_docs (id, user_id, doc_key, content, search_text, category, source,
             content_hash, created_at, updated_at)
         VALUES ($1, 'u', 'coffee', 'Prefers espresso', 'coffee prefers espresso', 'core', 'test',
             $2, 0, 0)",
    )
    .bind(id.to_string())
    .bind(content_hash("Prefers espresso"))
    .execute(&raw)
    .await
    .unwrap();
    raw.close().await;
    old.store.migrate().await.unwrap();
    let s = &old.store;
    let doc = s.get_memory(id).await.unwrap().unwrap();
    assert_eq!((doc.agent.as_str(), doc.shared), (MAIN_AGENT, false));
    assert_eq!(
        s.search_memories("u", MAIN_AGENT, "espresso", 5)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        s.search_memories("u", "family", "espresso", 5)
            .await
            .unwrap()
            .is_empty()
    );
    // The old key is now main's: main replaces it, family gets its own.
    let again = s
        .store_memory(
            &memo("u", Some("coffee"), "Prefers cortado", MemoryCategory::Core),
            at(2),
        )
        .await
        .unwrap();
    assert_eq!(again.id, id);
    let family = s
        .store_memory(&memo_of("family", Some("coffee"), "Tea", false), at(2))
        .await
        .unwrap();
    assert_ne!(family.id, id);
    old.cleanup().await;
}
