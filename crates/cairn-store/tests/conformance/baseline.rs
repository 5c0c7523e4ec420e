//! A fresh database is made from the baseline schema; it must equal one made
//! by every migration in turn: table by table, column by column, index by
//! index, constraint by constraint, and row by row (the seeded counters).
//! Migrations added after the baseline apply to both, so the comparison
//! always covers the whole sequence.

use std::collections::BTreeSet;

use cairn_store::{BASELINE_VERSION, MIGRATIONS};
use sqlx::Row;

use crate::fixture::Fixture;

pub async fn a_database_made_from_the_baseline_equals_one_migrated_step_by_step(fx: &Fixture) {
    let last = MIGRATIONS.last().unwrap().version;

    let baseline = fx.sibling().await;
    let report = baseline.store.migrate().await.unwrap();
    assert_eq!(report.baseline, Some(BASELINE_VERSION));
    assert_eq!(report.applied, (1..=last).collect::<Vec<_>>());
    // Opened again, nothing is left to apply.
    let again = baseline.store.migrate().await.unwrap();
    assert_eq!(
        (again.applied.len(), again.already_applied),
        (0, MIGRATIONS.len())
    );

    let steps = fx.sibling().await;
    let report = steps.store.migrate_up_to(i64::MAX).await.unwrap();
    assert_eq!(report.baseline, None);
    assert_eq!(report.applied, (1..=last).collect::<Vec<_>>());

    let made = describe(&baseline.url).await;
    let migrated = describe(&steps.url).await;
    let missing: Vec<_> = migrated.difference(&made).collect();
    let extra: Vec<_> = made.difference(&migrated).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the baseline differs from migrations 1..={last} applied in turn \
         (regenerate it: scripts/baseline-schema.sh {BASELINE_VERSION})\n\
         only after the steps: {missing:#?}\nonly from the baseline: {extra:#?}"
    );
    // The description is not empty by accident.
    assert!(made.iter().any(|f| f.starts_with("column routines.agent ")));
    assert!(made.iter().any(|f| f.starts_with("index ")));
    assert!(made.iter().any(|f| f.starts_with("row engine_counters ")));
    baseline.cleanup().await;
    steps.cleanup().await;
}

/// Every fact of a database's schema and rows, one line each.
async fn describe(url: &str) -> BTreeSet<String> {
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let postgres = url.starts_with("postgres");
    let facts = if postgres {
        POSTGRES_FACTS
    } else {
        SQLITE_FACTS
    };
    let mut out = BTreeSet::new();
    for query in facts {
        for row in sqlx::query(*query).fetch_all(&pool).await.unwrap() {
            out.insert(normalize(&row.get::<String, _>(0)));
        }
    }
    // Rows: every table's contents (the migration log without its times).
    let tables = if postgres {
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
    } else {
        "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type IN ('table', 'shadow') \
         AND name NOT LIKE 'sqlite_%'"
    };
    let names: Vec<String> = sqlx::query(tables)
        .fetch_all(&pool)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for table in names {
        let query = if table == "schema_migrations" {
            "SELECT CAST(version AS TEXT) || ' ' || name || ' ' || checksum FROM schema_migrations"
                .to_string()
        } else if postgres {
            format!("SELECT t::text FROM \"{table}\" t")
        } else {
            let columns: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT name FROM pragma_table_info('{table}')"
            )))
            .fetch_all(&pool)
            .await
            .unwrap()
            .iter()
            .map(|r| format!("quote(\"{}\")", r.get::<String, _>(0)))
            .collect();
            format!("SELECT {} FROM \"{table}\"", columns.join(" || ',' || "))
        };
        for row in sqlx::query(sqlx::AssertSqlSafe(query))
            .fetch_all(&pool)
            .await
            .unwrap()
        {
            out.insert(format!("row {table} {}", row.get::<String, _>(0)));
        }
    }
    pool.close().await;
    out
}

/// Whitespace and comments are not schema.
fn normalize(fact: &str) -> String {
    let without_comments: Vec<&str> = fact
        .lines()
        .map(|l| l.split_once("--").map_or(l, |(code, _)| code))
        .collect();
    let mut text = without_comments
        .join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (from, to) in [("( ", "("), (" )", ")"), (" ,", ",")] {
        text = text.replace(from, to);
    }
    text
}

const SQLITE_FACTS: &[&str] = &[
    // Each object's definition (tables, indexes, triggers, views).
    "SELECT 'object ' || type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') \
     FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'",
    "SELECT 'column ' || m.name || '.' || p.name || ' ' || p.type || ' notnull=' || p.\"notnull\" \
     || ' default=' || coalesce(p.dflt_value, 'none') || ' pk=' || p.pk || ' at=' || p.cid \
     || ' hidden=' || p.hidden \
     FROM sqlite_master m JOIN pragma_table_xinfo(m.name) p WHERE m.type = 'table'",
    "SELECT 'index ' || m.name || '.' || il.name || ' unique=' || il.\"unique\" || ' origin=' \
     || il.origin || ' partial=' || il.partial || ' keys=' || (SELECT group_concat( \
     coalesce(x.name, '<expr>') || ':' || x.\"desc\" || ':' || x.coll, ',') \
     FROM (SELECT * FROM pragma_index_xinfo(il.name) WHERE key ORDER BY seqno) x) \
     FROM sqlite_master m JOIN pragma_index_list(m.name) il WHERE m.type = 'table'",
    "SELECT 'foreign key ' || m.name || '.' || f.\"from\" || ' -> ' || f.\"table\" || '.' \
     || coalesce(f.\"to\", '') || ' update=' || f.on_update || ' delete=' || f.on_delete \
     || ' match=' || f.\"match\" || ' seq=' || f.seq \
     FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) f WHERE m.type = 'table'",
];

/// `current_schema()` is the test's own schema; its name is removed from
/// definitions so that two schemas compare.
const POSTGRES_FACTS: &[&str] = &[
    "SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type \
     || ' nullable=' || is_nullable || ' default=' || coalesce(column_default, 'none') \
     || ' at=' || ordinal_position || ' generated=' || is_generated || ' ' \
     || coalesce(generation_expression, '') || ' identity=' || is_identity \
     FROM information_schema.columns WHERE table_schema = current_schema()",
    "SELECT 'index ' || tablename || '.' || indexname || ': ' \
     || replace(indexdef, current_schema() || '.', '') \
     FROM pg_indexes WHERE schemaname = current_schema()",
    "SELECT 'constraint ' || c.relname || '.' || k.conname || ': ' \
     || replace(pg_get_constraintdef(k.oid), current_schema() || '.', '') \
     FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()",
    "SELECT 'trigger ' || c.relname || '.' || t.tgname || ': ' \
     || replace(pg_get_triggerdef(t.oid), current_schema() || '.', '') \
     FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
     JOIN pg_namespace n ON n.oid = c.relnamespace \
     WHERE n.nspname = current_schema() AND NOT t.tgisinternal",
    "SELECT 'relation ' || c.relkind::text || ' ' || c.relname FROM pg_class c \
     JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()",
    "SELECT 'function ' || p.proname || ': ' || replace(pg_get_functiondef(p.oid), \
     current_schema() || '.', '') FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace \
     WHERE n.nspname = current_schema()",
];
