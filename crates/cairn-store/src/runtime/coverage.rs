//! No public async method can skip the hop: every impl block of this crate
//! with one carries `#[on_store_runtime]` (which wraps them all), or is
//! named in [`EXEMPT`] with the reason. Read from the crate's own sources,
//! so a new file or block is checked the day it is written.

use std::path::{Path, PathBuf};

use quote::ToTokens;
use syn::{ImplItem, ImplItemFn, Item, ItemImpl, ReturnType, Visibility};

/// Types whose public async methods need no hop, and why.
const EXEMPT: &[(&str, &str)] = &[
    (
        "Watch",
        "waits on an in-process channel, never the database; a hop would hold a \
         paused caller's clock for as long as it waits, and no timer could fire",
    ),
    (
        "InstallKey",
        "reads and writes the install key's files in the home, never the database",
    ),
    (
        "AnyConnection",
        "the crate's own connection interface (`exec.rs`), called only by store \
         methods on a connection they already hold inside their hop",
    ),
    (
        "Direct",
        "the writers' own SQLite connection (`direct.rs`) under that interface: the same",
    ),
    (
        "& 'c mut Conn",
        "sqlx's `Executor` over that interface (`exec.rs`): the same",
    ),
];

/// What the check found.
#[derive(Debug, Default)]
struct Found {
    /// Public async methods inside `#[on_store_runtime]` blocks.
    wrapped: Vec<String>,
    /// Public async methods of exempt types.
    exempt: Vec<String>,
    /// Public methods that reach the caller without the hop, with what is wrong.
    missing: Vec<String>,
}

fn is_marked(block: &ItemImpl) -> bool {
    block.attrs.iter().any(|a| {
        a.path()
            .segments
            .last()
            .is_some_and(|s| s.ident == "on_store_runtime")
    })
}

/// A sync method handing out a future would run it wherever it is awaited.
fn returns_future(method: &ImplItemFn) -> bool {
    match &method.sig.output {
        ReturnType::Default => false,
        ReturnType::Type(_, ty) => ty
            .to_token_stream()
            .to_string()
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word.ends_with("Future")),
    }
}

fn check_impl(block: &ItemImpl, file: &str, found: &mut Found) {
    let ty = block.self_ty.to_token_stream().to_string();
    let marked = is_marked(block);
    let exempt = EXEMPT.iter().any(|(name, _)| *name == ty);
    // A trait's methods are as public as the trait.
    let trait_impl = block.trait_.is_some();
    for item in &block.items {
        let ImplItem::Fn(method) = item else {
            continue;
        };
        if !trait_impl && !matches!(method.vis, Visibility::Public(_)) {
            continue;
        }
        let name = format!("{file}: {ty}::{}", method.sig.ident);
        if method.sig.asyncness.is_none() {
            if returns_future(method) && !exempt {
                found.missing.push(format!(
                    "{name} returns a future: make it an async fn (the hop wraps only those)"
                ));
            }
        } else if marked {
            found.wrapped.push(name);
        } else if exempt {
            found.exempt.push(name);
        } else {
            found.missing.push(format!(
                "{name} is public and async in an impl block without #[cairn_store_macros::on_store_runtime]"
            ));
        }
    }
}

fn check_items(items: &[Item], file: &str, found: &mut Found) {
    for item in items {
        match item {
            Item::Impl(block) => check_impl(block, file, found),
            Item::Fn(f) if matches!(f.vis, Visibility::Public(_)) && f.sig.asyncness.is_some() => {
                found.missing.push(format!(
                    "{file}: {} is a public async fn outside any impl block: make it a method of an #[on_store_runtime] block",
                    f.sig.ident
                ));
            }
            Item::Mod(module) => {
                if let Some((_, items)) = &module.content {
                    check_items(items, file, found);
                }
            }
            _ => {}
        }
    }
}

fn check_source(source: &str, file: &str, found: &mut Found) {
    match syn::parse_file(source) {
        Ok(parsed) => check_items(&parsed.items, file, found),
        Err(e) => found.missing.push(format!("{file}: does not parse: {e}")),
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "a test reading its crate's sources"
)]
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
#[expect(
    clippy::disallowed_methods,
    reason = "a test reading its crate's sources"
)]
fn every_public_async_method_runs_on_the_store_runtime() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut found = Found::default();
    for path in &files {
        let source = std::fs::read_to_string(path).unwrap();
        let name = path
            .strip_prefix(&root)
            .unwrap_or(path)
            .display()
            .to_string();
        check_source(&source, &name, &mut found);
    }
    assert!(
        found.missing.is_empty(),
        "these skip the store's runtime:\n{}",
        found.missing.join("\n")
    );
    // The walk saw the store: a check that found nothing would pass anything.
    assert!(files.len() > 40, "{} source files", files.len());
    assert!(
        found.wrapped.len() > 150,
        "only {} wrapped methods",
        found.wrapped.len()
    );
    assert!(
        found
            .wrapped
            .iter()
            .any(|m| m.ends_with("Store::create_job"))
            && found.wrapped.iter().any(|m| m.ends_with("Import::finish")),
        "{:?}",
        found.wrapped
    );
    assert_eq!(
        found.exempt,
        [
            "signal/mod.rs: Watch::changed",
            "install_key.rs: InstallKey::load_or_create",
            "install_key.rs: InstallKey::read_key",
            "install_key.rs: InstallKey::read_next",
            "install_key.rs: InstallKey::write_next",
            "install_key.rs: InstallKey::promote_next",
            "install_key.rs: InstallKey::drop_next",
        ]
    );
}

#[test]
fn a_block_without_the_attribute_is_caught() {
    let mut found = Found::default();
    check_source(
        "impl Store {
            pub async fn forgot(&self) {}
            pub(crate) async fn inner(&self) {}
            pub fn later(&self) -> impl std::future::Future<Output = ()> { async {} }
        }
        #[cairn_store_macros::on_store_runtime]
        impl Store {
            pub async fn kept(&self) {}
        }
        pub async fn loose() {}
        mod nested {
            impl Snapshot {
                pub async fn hidden(&mut self) {}
            }
        }",
        "x.rs",
        &mut found,
    );
    assert_eq!(found.wrapped, ["x.rs: Store::kept"]);
    let missing = found.missing.join("\n");
    for name in ["Store::forgot", "Store::later", "loose", "Snapshot::hidden"] {
        assert!(missing.contains(name), "{name} not caught:\n{missing}");
    }
    assert!(!missing.contains("inner"), "{missing}");
}

/// The pool answers only inside a hop (debug builds, so every test): a
/// query from a method that skipped it fails whichever test reaches it.
#[cfg(debug_assertions)]
#[tokio::test]
#[should_panic(expected = "outside the store's runtime")]
async fn the_pool_outside_a_hop_is_refused() {
    let (store, _) = crate::Store::open("sqlite::memory:").await.unwrap();
    let _ = store.pool();
}
