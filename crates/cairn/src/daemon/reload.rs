//! Reloading the configuration in a running daemon (SIGHUP, or config.toml
//! changed): the settings that changed are found by comparing the resolved
//! values key by key; each part that can take new settings while running
//! registers a hook for its keys ([`Reloader::on`]), and every other change
//! is reported as needing a restart. Values are never logged, only keys (some
//! are secrets).

use cairn_core::config::Config;

/// Applies a new configuration to one running part.
type Hook = Box<dyn Fn(&Config) -> anyhow::Result<()> + Send + Sync>;

/// The configuration in force and the hooks that change it.
pub struct Reloader {
    current: Config,
    hooks: Vec<(Vec<&'static str>, Hook)>,
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
        }
    }

    /// Registers `apply` for the settings under `keys` (a key, a section such
    /// as `channels`, or a prefix such as `notify` for every `notify.*`);
    /// it is called once per reload in which any of them changed.
    pub fn on(
        &mut self,
        keys: &[&'static str],
        apply: impl Fn(&Config) -> anyhow::Result<()> + Send + Sync + 'static,
    ) {
        self.hooks.push((keys.to_vec(), Box::new(apply)));
    }

    /// Compares `new` with the configuration in force and applies what can
    /// be applied. When a hook fails its keys keep their old values (and
    /// are tried again at the next reload).
    pub fn reload(&mut self, new: Config) -> ReloadReport {
        let changed = changed_keys(&self.current, &new);
        let mut report = ReloadReport::default();
        let mut handled = vec![false; changed.len()];
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
            let outcome = apply(&new);
            for i in mine {
                if handled[i] {
                    continue;
                }
                handled[i] = true;
                match &outcome {
                    Ok(()) => report.applied.push(changed[i].clone()),
                    Err(e) => report.failed.push((changed[i].clone(), format!("{e:#}"))),
                }
            }
        }
        for (i, key) in changed.iter().enumerate() {
            if !handled[i] {
                report.need_restart.push(key.clone());
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
        if before != after {
            keys.push(name.to_string());
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
        })
        .unwrap()
    }

    #[test]
    fn changes_go_to_their_hooks_and_the_rest_needs_a_restart() {
        let mut r = Reloader::new(config("[routines]\nmax_concurrent = 3\n"));
        let calls = Arc::new(AtomicU32::new(0));
        let c = Arc::clone(&calls);
        r.on(&["routines.max_concurrent"], move |cfg| {
            c.store(cfg.routines.max_concurrent, Ordering::SeqCst);
            Ok(())
        });
        r.on(&["notify", "channels"], |_| anyhow::bail!("bad channel"));
        let report = r.reload(config(
            "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n",
        ));
        assert_eq!(report.applied, vec!["routines.max_concurrent"]);
        assert_eq!(report.need_restart, vec!["gateway.port"]);
        assert!(report.failed.is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        // Nothing changed since: nothing to report.
        assert!(
            r.reload(config(
                "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n"
            ))
            .is_empty()
        );
        let report = r.reload(config(
            "[routines]\nmax_concurrent = 5\n[gateway]\nport = 4000\n[channels.x]\ntype = \"log\"\n",
        ));
        assert_eq!(
            report.failed,
            vec![("channels".to_string(), "bad channel".to_string())]
        );
    }
}
