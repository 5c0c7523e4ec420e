//! Reloading the configuration in a running daemon (SIGHUP, or config.toml
//! changed): the settings that changed are found by comparing the resolved
//! values key by key; each part that can take new settings while running
//! registers a hook for its keys ([`Reloader::on`]), and every other change
//! is reported as needing a restart. A free-form table whose old and new
//! values are both tables is compared one level down (`tools.policy`,
//! `channels.NAME`), so one part of it may reload while another needs a
//! restart (a table added or removed is compared with an empty one). Values are never logged, only keys (some are secrets).
//!
//! The hooks are registered in [`crate::wiring::register_reloads`]; the
//! keys they cover are [`cairn_core::config::reloadable::RELOADABLE`], which
//! `docs/configuration.md` lists with every key that needs a restart.

use std::collections::BTreeSet;
use std::future::Future;

use cairn_core::config::Config;
use futures::future::BoxFuture;
use secrecy::ExposeSecret;
use serde_json::Value;

/// Applies a new configuration to one running part, or refuses it (the
/// old settings then stay in force).
type Hook = Box<dyn Fn(Config) -> BoxFuture<'static, anyhow::Result<()>> + Send + Sync>;

/// The configuration in force and the hooks that change it.
pub struct Reloader {
    current: Config,
    hooks: Vec<(Vec<&'static str>, Hook)>,
    /// Called whenever the vault's values differ (whatever refers to them).
    vault_hooks: Vec<Hook>,
}

/// What one reload did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Keys now in force.
    pub applied: Vec<String>,
    /// Keys that changed but take effect only after a restart.
    pub need_restart: Vec<String>,
    /// Keys whose part refused the new values, with why (the old ones stay).
    pub failed: Vec<(String, String)>,
}

impl ReloadReport {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.applied.is_empty() && self.need_restart.is_empty() && self.failed.is_empty()
    }
}

impl Reloader {
    /// Starts from the configuration the daemon was started with.
    pub fn new(current: Config) -> Self {
        Self {
            current,
            hooks: Vec::new(),
            vault_hooks: Vec::new(),
        }
    }

    /// Registers `apply` for a change of the vault (a secret stored,
    /// replaced or removed by another process), whether or not the
    /// configuration refers to it. A failure is logged; nothing is kept
    /// back for it.
    pub fn on_vault<F, Fut>(&mut self, apply: F)
    where
        F: Fn(Config) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.vault_hooks
            .push(Box::new(move |config| Box::pin(apply(config))));
    }

    /// Registers `apply` for the settings under `keys` (a key, a section such
    /// as `channels`, or a prefix such as `notify` for every `notify.*`);
    /// it is called once per reload in which any of them changed, and
    /// must check everything before it changes anything.
    pub fn on<F, Fut>(&mut self, keys: &[&'static str], apply: F)
    where
        F: Fn(Config) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        self.hooks.push((
            keys.to_vec(),
            Box::new(move |config| Box::pin(apply(config))),
        ));
    }

    /// Every key, section or prefix a hook is registered for.
    #[cfg(test)]
    pub fn keys(&self) -> Vec<&'static str> {
        self.hooks
            .iter()
            .flat_map(|(k, _)| k.iter().copied())
            .collect()
    }

    /// Compares `new` with the configuration in force and applies what can
    /// be applied. When a hook fails its keys keep their old values (and
    /// are tried again at the next reload).
    pub async fn reload(&mut self, new: Config) -> ReloadReport {
        let secrets = changed_secrets(&self.current, &new);
        let mut changed = changed_keys(&self.current, &new);
        // What refers to a changed secret takes its new value as a change.
        for key in keys_referring_to(&new, &secrets) {
            if !changed.contains(&key) {
                changed.push(key);
            }
        }
        let mut report = ReloadReport::default();
        // Per key: `None` while no hook took it (it needs a restart), else
        // the first refusal of any hook that covers it. A key is in force
        // only when every part that reads it took the new value.
        let mut outcomes: Vec<Option<Result<(), String>>> = vec![None; changed.len()];
        for (keys, apply) in &self.hooks {
            let mine: Vec<usize> = changed
                .iter()
                .enumerate()
                .filter(|(_, k)| keys.iter().any(|p| covers(p, k)))
                .map(|(i, _)| i)
                .collect();
            if mine.is_empty() {
                continue;
            }
            let outcome = apply(new.clone()).await.map_err(|e| format!("{e:#}"));
            for i in mine {
                match (&outcomes[i], &outcome) {
                    (Some(Err(_)), _) => {}
                    _ => outcomes[i] = Some(outcome.clone()),
                }
            }
        }
        // After what reads the secrets took them: once a new secret is
        // watched, the parts that use it use it too.
        if !secrets.is_empty() {
            for apply in &self.vault_hooks {
                if let Err(e) = apply(new.clone()).await {
                    tracing::error!(error = %format!("{e:#}"), "the vault's change was not applied everywhere");
                }
            }
        }
        for (key, outcome) in changed.iter().zip(outcomes) {
            match outcome {
                None => report.need_restart.push(key.clone()),
                Some(Ok(())) => report.applied.push(key.clone()),
                Some(Err(e)) => report.failed.push((key.clone(), e)),
            }
        }
        if report.failed.is_empty() {
            self.current = new;
        }
        report
    }
}

/// Whether `pattern` (a key, section or prefix) covers `key`.
fn covers(pattern: &str, key: &str) -> bool {
    key == pattern
        || key
            .strip_prefix(pattern)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// The names of the vault's secrets stored, replaced or removed between
/// `old` and `new` (compared by value, never logged).
fn changed_secrets(old: &Config, new: &Config) -> BTreeSet<String> {
    let (a, b) = (old.env().secrets(), new.env().secrets());
    let same = |name: &String| match (a.get(name), b.get(name)) {
        (Some(x), Some(y)) => x.expose_secret() == y.expose_secret(),
        _ => false,
    };
    a.keys()
        .chain(b.keys())
        .filter(|n| !same(n))
        .cloned()
        .collect()
}

/// The free-form tables (a table's entries one by one, as
/// [`changed_keys`] names them) that refer to any of `secrets` as
/// `${secret:NAME}`: their text is the same, what it reads is not. The
/// scalar settings need none: their resolved values differ.
fn keys_referring_to(config: &Config, secrets: &BTreeSet<String>) -> Vec<String> {
    if secrets.is_empty() {
        return Vec::new();
    }
    let refers = |value: &Value| {
        let names = cairn_core::text::secret_references(&value.to_string());
        names.iter().any(|n| secrets.contains(n))
    };
    let mut keys = Vec::new();
    for (name, section) in &config.settings.sections {
        match &section.value {
            Value::Object(map) => keys.extend(
                map.iter()
                    .filter(|(_, v)| refers(v))
                    .map(|(sub, _)| format!("{name}.{sub}")),
            ),
            other if refers(other) => keys.push((*name).to_string()),
            _ => {}
        }
    }
    keys
}

/// Every scalar key and free-form section whose value differs.
pub fn changed_keys(old: &Config, new: &Config) -> Vec<String> {
    let mut keys = Vec::new();
    for r in &new.settings.values {
        let before = old.settings.get(r.def.key).and_then(|o| o.value.as_ref());
        if before != r.value.as_ref() {
            keys.push(r.def.key.to_string());
        }
    }
    let names: std::collections::BTreeSet<&str> = old
        .settings
        .sections
        .keys()
        .chain(new.settings.sections.keys())
        .copied()
        .collect();
    for name in names {
        let before = old.settings.sections.get(name).map(|s| &s.value);
        let after = new.settings.sections.get(name).map(|s| &s.value);
        // A table written for the first time, or removed, is compared
        // with an empty one.
        let empty = Value::Object(serde_json::Map::new());
        let (before, after) = match (before, after) {
            (None, Some(b @ Value::Object(_))) => (Some(&empty), Some(b)),
            (Some(a @ Value::Object(_)), None) => (Some(a), Some(&empty)),
            other => other,
        };
        match (before, after) {
            (Some(Value::Object(a)), Some(Value::Object(b))) => {
                let subs: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for sub in subs {
                    if a.get(sub) != b.get(sub) {
                        keys.push(format!("{name}.{sub}"));
                    }
                }
            }
            _ if before != after => keys.push(name.to_string()),
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use cairn_core::config::ConfigInput;

    use super::*;

    fn config(file: &str) -> Config {
        Config::load(&ConfigInput {
            home: "/tmp/cairn-test".into(),
            file: Some(("/tmp/cairn-test/config.toml".into(), file.to_string())),
            env: Default::default(),
            system_zone: Some("UTC".into()),
            secrets: Default::default(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn changes_go_to_their_hooks_and_the_rest_needs_a_restart() {
        let mut r = Reloader::new(config("[routines]\nmax_concurrent = 3\n"));
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        r.on(&["routines.max_concurrent"], move |cfg| {
            c.store(cfg.routines.max_concurrent, Ordering::SeqCst);
            async { Ok(()) }
        });
        r.on(&["notify", "channels"], |_| async {
            anyhow::bail!("bad channel")
        });
        let report = r
            .reload(config(
                "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n",
            ))
            .await;
        assert_eq!(report.applied, vec!["routines.max_concurrent"]);
        assert_eq!(report.need_restart, vec!["gateway.port"]);
        assert!(report.failed.is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        // Nothing changed since: nothing to report.
        assert!(
            r.reload(config(
                "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n"
            ))
            .await
            .is_empty()
        );
        let report = r
            .reload(config(
                "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n[channels.x]\ntype = \"log\"\n",
            ))
            .await;
        assert_eq!(
            report.failed,
            vec![("channels.x".to_string(), "bad channel".to_string())]
        );
    }

    #[tokio::test]
    async fn a_key_two_parts_read_is_in_force_only_when_both_took_it() {
        let before = "[channels.a]\ntype = \"log\"\n";
        let after = "[channels.a]\ntype = \"inbox\"\n";
        let mut r = Reloader::new(config(before));
        r.on(&["channels"], |_| async { Ok(()) });
        r.on(&["channels"], |_| async {
            anyhow::bail!("cannot restart it")
        });
        let report = r.reload(config(after)).await;
        assert!(report.applied.is_empty(), "{report:?}");
        assert_eq!(
            report.failed,
            vec![("channels.a".to_string(), "cannot restart it".to_string())]
        );
    }

    fn config_with_vault(file: &str, vault: &[(&str, &str)]) -> Config {
        Config::load(&ConfigInput {
            home: "/tmp/cairn-test".into(),
            file: Some(("/tmp/cairn-test/config.toml".into(), file.to_string())),
            env: Default::default(),
            system_zone: Some("UTC".into()),
            secrets: vault
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string().into()))
                .collect(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_changed_secret_reaches_what_refers_to_it_and_the_vault_hooks() {
        let file = "[[tools.http.credentials]]\nhost = \"x.test\"\nheader = \"A\"\n\
                    value = \"${secret:GH}\"\n[tools.policy]\ndeny = []\n";
        let mut r = Reloader::new(config_with_vault(file, &[("GH", "old-value-1")]));
        let vault_calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&vault_calls);
        r.on_vault(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        });
        r.on(&["tools.http", "tools.policy"], |_| async { Ok(()) });
        // The same values: nothing to do.
        let same = r
            .reload(config_with_vault(file, &[("GH", "old-value-1")]))
            .await;
        assert!(same.is_empty(), "{same:?}");
        assert_eq!(vault_calls.load(Ordering::SeqCst), 0);
        // A secret nothing refers to: the vault's hooks only.
        let added = [("GH", "old-value-1"), ("NEW", "new-value-2")];
        let report = r.reload(config_with_vault(file, &added)).await;
        assert!(report.is_empty(), "{report:?}");
        assert_eq!(vault_calls.load(Ordering::SeqCst), 1);
        // The secret a table refers to: that table takes its new value.
        let changed = [("GH", "new-value-1"), ("NEW", "new-value-2")];
        let report = r.reload(config_with_vault(file, &changed)).await;
        assert_eq!(report.applied, vec!["tools.http"], "{report:?}");
        assert_eq!(vault_calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_table_is_compared_one_level_down() {
        let before = "[tools.policy]\ndeny = []\n[tools.limits]\ntimeout_secs = 5\n";
        let after = "[tools.policy]\ndeny = [\"shell\"]\n[tools.limits]\ntimeout_secs = 9\n";
        let mut r = Reloader::new(config(before));
        r.on(&["tools.policy"], |_| async { Ok(()) });
        let report = r.reload(config(after)).await;
        assert_eq!(report.applied, vec!["tools.policy"]);
        assert_eq!(report.need_restart, vec!["tools.limits"]);
    }
}
