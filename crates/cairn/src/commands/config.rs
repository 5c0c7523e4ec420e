//! `cairn config show`: every setting's effective value and its source.

use std::process::ExitCode;

use cairn_core::config::redact_json;
use serde_json::json;

use crate::settings;

/// Prints the effective configuration; secrets are redacted.
pub fn show(as_json: bool) -> anyhow::Result<ExitCode> {
    let config = settings::load()?;
    let s = &config.settings;
    let file = settings::config_path(&s.home);
    if as_json {
        let mut values = serde_json::Map::new();
        for r in &s.values {
            let mut entry = json!({
                "value": r.display_value().map(|v| v.to_json()),
                "source": r.source.kind(),
            });
            match &r.source {
                cairn_core::config::Source::Env { var } => entry["env"] = json!(var),
                cairn_core::config::Source::File { line } => entry["line"] = json!(line),
                cairn_core::config::Source::Default => {}
            }
            if r.def.secret {
                entry["secret"] = json!(true);
            }
            if let Some(why) = &r.unavailable {
                entry["unavailable"] = json!(why.to_string());
            }
            values.insert(r.def.key.to_string(), entry);
        }
        let sections: serde_json::Map<String, serde_json::Value> = s
            .sections
            .iter()
            .map(|(k, sec)| {
                (
                    k.to_string(),
                    json!({"value": redact_json(&sec.value), "source": "file", "line": sec.line}),
                )
            })
            .collect();
        let out = json!({
            "home": s.home,
            "file": file,
            "file_exists": s.file.is_some(),
            "settings": values,
            "sections": sections,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("home: {}", s.home.display());
        match &s.file {
            Some(f) => println!("file: {}", f.display()),
            None => println!("file: {} (not present)", file.display()),
        }
        println!();
        let width = s.values.iter().map(|r| r.def.key.len()).max().unwrap_or(0);
        for r in &s.values {
            let value = match (&r.unavailable, r.display_value()) {
                (Some(why), _) => format!(
                    "(unavailable: environment variable {} is not set)",
                    why.variable
                ),
                (None, Some(v)) => v.to_string(),
                (None, None) => "(unset)".to_string(),
            };
            println!("{:width$}  {value}  [{}]", r.def.key, r.source);
        }
        for (key, sec) in &s.sections {
            println!("{key:width$}  (table)  [file:{}]", sec.line);
        }
    }
    Ok(ExitCode::SUCCESS)
}
