//! Copying a whole database: the copier's table list against the schema the
//! migrations build, and a copy (to the other backend when PostgreSQL is
//! available) that keeps every row of every table.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_core::notification::Priority;
use cairn_store::portable::{self, Cell, NOT_COPIED, TABLES, jsonl};
use cairn_store::{AttemptOutcome, CostLimits, MemoryCategory, Store, StoreError, content_hash};
use chrono::Duration as ChronoDuration;
use serde_json::json;

use crate::fixture::Fixture;
use crate::routines::{at, routine, run_for};

/// Rows in every copied table, written through the store's own API.
pub async fn populate(s: &Store) {
    s.set_setting("prefs", &json!({"theme": "dark"}))
        .await
        .unwrap();
    let r = routine("ada", "daily-check");
    s.create_routine(&r).await.unwrap();
    let run = run_for(&r, Some(at(60)), at(61));
    s.start_run(&run).await.unwrap();
    s.record_run_try(&cairn_core::routine::RunTry {
        run_id: run.id,
        number: 1,
        started_at: at(61),
        ended_at: at(62),
        status: cairn_core::routine::RunStatus::Failed,
        summary: Some("timed out after 30s; cancelled".into()),
    })
    .await
    .unwrap();
    // A paused routine: its pause columns travel with it.
    let pause = cairn_core::routine::Pause {
        at: at(70),
        by: "ada (cli)".into(),
        note: Some("moving house".into()),
    };
    assert!(s.pause_routine(r.id, &pause).await.unwrap());

    let session = s
        .get_or_create_session("ada", "terminal", at(0))
        .await
        .unwrap();
    let mut thread = crate::sessions::thread_row(session.id, Some("ext-1"), 1);
    s.create_thread(&thread).await.unwrap();
    let turns = vec![
        crate::turns::stored(1, "hello"),
        crate::turns::stored(2, "ça va?"),
    ];
    thread.view = cairn_store::view_of([1, 2]);
    s.save_thread(&thread, &turns, &[]).await.unwrap();
    s.push_checkpoint(thread.id, &crate::sessions::checkpoint(1), 10)
        .await
        .unwrap();

    // A child job whose id sorts before its parent's, with enough jobs
    // between them that they land in different INSERTs: copied first, it
    // refers to a row not yet in the target.
    for i in 0..50 {
        s.create_job(&crate::jobs::job("ada", &format!("filler {i}"), 0))
            .await
            .unwrap();
    }
    let parent = crate::jobs::job("ada", "parent", 1);
    let mut child = crate::jobs::job("ada", "child", 2);
    child.id = uuid::Uuid::from_u128(1);
    child.parent_id = Some(parent.id);
    s.create_job(&parent).await.unwrap();
    s.create_job(&child).await.unwrap();

    let mut n = crate::notifications::pending(5, "hook");
    n.priority = Priority::Urgent;
    s.insert_notification(&n).await.unwrap();
    s.claim_notification(n.id, "p1", at(5), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    s.record_attempt(
        n.id,
        "p1",
        &crate::notifications::attempt(1, 6, true, "HTTP 200"),
        &AttemptOutcome::Delivered,
    )
    .await
    .unwrap();

    s.create_api_token(&crate::gateway::new_token("laptop", "hash-1", None), at(0))
        .await
        .unwrap();
    s.create_pairing_code("code-hash", at(0), at(900))
        .await
        .unwrap();
    s.claim_idempotency_key(
        "webhook",
        "k1",
        "owner-1",
        at(0),
        ChronoDuration::hours(24),
        ChronoDuration::seconds(60),
    )
    .await
    .unwrap();
    s.create_background_task(&crate::background::task("bg-1", "s1", at(0)))
        .await
        .unwrap();

    let doc = s
        .store_memory(
            &crate::memory::memo(
                "ada",
                Some("coffee"),
                "Prefers espresso",
                MemoryCategory::Core,
            ),
            at(0),
        )
        .await
        .unwrap();
    // Another agent's shared document: the copy keeps its owner and flag.
    s.store_memory(
        &cairn_store::NewMemory {
            agent: "family".to_string(),
            shared: true,
            ..crate::memory::memo(
                "ada",
                Some("tea"),
                "Family drinks tea",
                MemoryCategory::Core,
            )
        },
        at(0),
    )
    .await
    .unwrap();
    let hash = content_hash("Prefers espresso");
    s.set_memory_embedding(doc.id, &hash, "m", &[0.6, -0.8, 0.0])
        .await
        .unwrap();
    s.cache_embedding(&hash, "m", &[0.6, -0.8, 0.0], at(0))
        .await
        .unwrap();

    let limits = CostLimits {
        budget_micros: None,
        hourly_limit: None,
    };
    s.admit_llm_call(at(0), limits, true).await.unwrap();
    s.add_llm_spend(1_234, at(1)).await.unwrap();
    s.add_model_spend("fake-model", 1_234, at(1)).await.unwrap();
    s.add_agent_spend("family", 1_234, true, at(1))
        .await
        .unwrap();
    s.record_tool_failure("shell", "exit 1", Some(5), at(0))
        .await
        .unwrap();
    s.claim_channel_poll("tg", "proc", at(0), chrono::Duration::seconds(60))
        .await
        .unwrap();
    s.allow_channel_user("tg", "42", "cli", at(0))
        .await
        .unwrap();
    s.note_channel_stranger("tg", "7", at(0)).await.unwrap();
    s.first_channel_message("wa", "wamid.1", at(0), chrono::Duration::days(30))
        .await
        .unwrap();
    s.keep_channel_delivery("wa", "[]", at(0)).await.unwrap();
    let key = cairn_store::VaultKey::derive(&[3; 32]);
    s.vault_set(&key, "GH", &"s3cr3t".into(), at(0))
        .await
        .unwrap();
    s.record_secret_leak(&cairn_store::SecretLeak {
        id: uuid::Uuid::from_u128(47),
        at: at(0),
        secret: "GH".into(),
        place: "tool".into(),
        target: "http_request".into(),
        agent: Some("main".into()),
        session_id: Some("cli:1".into()),
        run_id: None,
        context: "GET https://b.example/?k=[secret:GH]".into(),
    })
    .await
    .unwrap();
}

/// Every copied table's rows by column name (backend-only columns left
/// out), sorted, so two backends' copies compare equal.
async fn dump(s: &Store) -> BTreeMap<String, Vec<Vec<(String, Cell)>>> {
    let mut snap = s.snapshot().await.unwrap();
    let headers = snap.headers();
    let mut out: BTreeMap<String, Vec<Vec<(String, Cell)>>> = BTreeMap::new();
    for h in &headers {
        out.insert(h.table.clone(), Vec::new());
    }
    while let Some(batch) = snap.next_batch().await.unwrap() {
        let header = headers.iter().find(|h| h.table == batch.table).unwrap();
        for row in batch.rows {
            let named = header
                .columns
                .iter()
                .zip(row)
                .filter(|(c, _)| !(batch.table == "memory_docs" && c.name == "seq"))
                .map(|(c, cell)| (c.name.clone(), cell))
                .collect();
            out.get_mut(&batch.table).unwrap().push(named);
        }
    }
    for rows in out.values_mut() {
        rows.sort_by_key(|r| format!("{r:?}"));
    }
    out
}

/// Copies `from` into `to` the way `cairn db copy` does.
async fn copy(
    from: &Store,
    to: &Store,
    replace: bool,
) -> Result<Vec<portable::TableCount>, StoreError> {
    let mut snap = from.snapshot().await?;
    let mut import = to.begin_import(&snap.headers(), replace).await?;
    while let Some(batch) = snap.next_batch().await? {
        import.write(batch).await?;
    }
    import.finish(&snap.counts()).await
}

/// A fresh, migrated database of the other backend when PostgreSQL is
/// available, else of the same one.
async fn other(fx: &Fixture) -> Fixture {
    if fx.url.starts_with("sqlite:") {
        return match Fixture::postgres("portable copy to the other backend").await {
            Some(pg) => pg,
            None => Fixture::sqlite().await,
        };
    }
    Fixture::sqlite().await
}

pub async fn the_copier_knows_every_table(fx: &Fixture) {
    let schema = fx.store.schema_tables().await.unwrap();
    for name in &schema {
        assert!(
            TABLES.iter().any(|t| t.name == name) || NOT_COPIED.contains(&name.as_str()),
            "table {name} is in the schema but cairn_store::portable::TABLES does not list it: \
             add it (after the tables it refers to) so `cairn db copy` and backups keep its rows"
        );
    }
    for t in TABLES {
        assert!(
            schema.contains(&t.name.to_string()),
            "{} is listed but not in the schema",
            t.name
        );
    }
    if !fx.url.starts_with("sqlite:") {
        return;
    }
    // Dependency order: a table comes after every table it refers to, or
    // refers to itself only through columns written after its rows.
    let pool = sqlx::SqlitePool::connect(&fx.url).await.unwrap();
    let mut seen = 0;
    for (i, t) in TABLES.iter().enumerate() {
        let refs: Vec<(String, String)> =
            sqlx::query_as(r#"SELECT "table", "from" FROM pragma_foreign_key_list($1)"#)
                .bind(t.name)
                .fetch_all(&pool)
                .await
                .unwrap();
        for (target, column) in refs {
            seen += 1;
            if target == t.name {
                assert!(
                    t.self_refs.contains(&column.as_str()),
                    "{}.{column} refers to its own table: list it in self_refs",
                    t.name
                );
                continue;
            }
            let at = TABLES.iter().position(|o| o.name == target);
            assert!(
                at.is_some_and(|at| at < i),
                "{} refers to {target}, which TABLES must list before it",
                t.name
            );
        }
    }
    assert!(
        seen >= 8,
        "the schema's foreign keys were not read ({seen})"
    );
    pool.close().await;
}

pub async fn a_copy_keeps_every_row_of_every_table(fx: &Fixture) {
    populate(&fx.store).await;
    let source = dump(&fx.store).await;
    for (table, rows) in &source {
        assert!(
            !rows.is_empty(),
            "the fixture should write a row in {table}"
        );
    }
    let target = other(fx).await;
    let counts = copy(&fx.store, &target.store, false).await.unwrap();
    assert_eq!(counts.len(), TABLES.len());
    assert_eq!(dump(&target.store).await, source);

    // The copy is usable through the API: search, embeddings, tokens, threads.
    let hits = target
        .store
        .search_memories("ada", cairn_store::MAIN_AGENT, "espresso", 5)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "the full-text index follows the rows");
    let tea = target
        .store
        .get_memory_by_key("ada", cairn_store::MAIN_AGENT, "tea")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((tea.agent.as_str(), tea.shared), ("family", true));
    let found = target
        .store
        .authenticate_api_token("hash-1", at(10))
        .await
        .unwrap();
    assert_eq!(found.unwrap().name, "laptop");

    // A second copy refuses the non-empty target, then replaces it.
    let err = copy(&fx.store, &target.store, false).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Conflict(m) if m.contains("not empty")),
        "{err}"
    );
    copy(&fx.store, &target.store, true).await.unwrap();
    assert_eq!(dump(&target.store).await, source);
    target.cleanup().await;
}

pub async fn a_copy_through_json_lines_is_the_same(fx: &Fixture) {
    populate(&fx.store).await;
    let mut snap = fx.store.snapshot().await.unwrap();
    let headers = snap.headers();
    let mut lines: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for h in &headers {
        lines.insert(h.table.clone(), vec![jsonl::header_line(h)]);
    }
    while let Some(batch) = snap.next_batch().await.unwrap() {
        let file = lines.get_mut(&batch.table).unwrap();
        file.extend(batch.rows.iter().map(|r| jsonl::row_line(r)));
    }
    let target = other(fx).await;
    let parsed: Vec<_> = TABLES
        .iter()
        .map(|t| jsonl::parse_header(&lines[t.name][0]).unwrap())
        .collect();
    let mut import = target.store.begin_import(&parsed, false).await.unwrap();
    for header in &parsed {
        let rows = lines[&header.table][1..]
            .iter()
            .map(|l| jsonl::parse_row(header, l).unwrap())
            .collect();
        import
            .write(portable::Batch {
                table: header.table.clone(),
                rows,
            })
            .await
            .unwrap();
    }
    import.finish(&snap.counts()).await.unwrap();
    assert_eq!(dump(&target.store).await, dump(&fx.store).await);
    target.cleanup().await;
}
