//! Fuzzes config.toml: parse, resolve and type-check arbitrary text. Nothing
//! may panic; every error must name the file (there is no environment, so
//! every problem is the file's) with a line inside it; and a loaded config's
//! `Debug` hides the API key. Also fuzzes `redact_url`: a password placed in
//! the userinfo or a `password=` parameter never shows, whatever it holds.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run config_load -- -dict=config.dict -max_total_time=240`

#![no_main]

use std::path::PathBuf;

use cairn_core::config::{Config, ConfigError, ConfigInput, redact_url};
use libfuzzer_sys::fuzz_target;
use secrecy::ExposeSecret;

const FILE: &str = "/fuzz/config.toml";

fuzz_target!(|text: &str| {
    check_redaction(text);

    let input = ConfigInput {
        home: PathBuf::from("/fuzz"),
        file: Some((PathBuf::from(FILE), text.to_string())),
        env: Default::default(),
        system_zone: Some("UTC".to_string()),
    };
    let lines = text.lines().count().max(1) + 1;
    match Config::load(&input) {
        Ok(config) => {
            if let Some(key) = &config.llm.api_key {
                let key = key.expose_secret();
                // Short keys may occur in the output by coincidence ("cairn").
                if key.len() >= 12 {
                    let debug = format!("{config:?}");
                    assert!(!debug.contains(key), "api key {key:?} shown in Debug");
                }
            }
        }
        Err(errors) => {
            assert!(!errors.0.is_empty(), "an Err without errors");
            for error in &errors.0 {
                let shown = error.to_string();
                assert!(
                    shown.starts_with(FILE),
                    "error does not name the file: {shown}"
                );
                let line = match error {
                    ConfigError::Syntax { line, .. }
                    | ConfigError::UnknownKey { line, .. }
                    | ConfigError::WrongType { line, .. } => Some(*line),
                    _ => None,
                };
                if let Some(line) = line {
                    assert!(
                        (1..=lines).contains(&line),
                        "line {line} outside the file: {shown}"
                    );
                }
            }
        }
    }
});

/// A password anywhere in the userinfo, or in a `password=` query value
/// without `&`, is hidden, and nothing else changes.
fn check_redaction(secret: &str) {
    let url = format!("postgres://ada:{secret}@db.example:5432/cairn");
    assert_eq!(
        redact_url(&url),
        "postgres://ada:****@db.example:5432/cairn",
        "{url:?}"
    );
    if !secret.contains('&') {
        let url = format!("postgres://db/cairn?sslmode=require&Password={secret}");
        assert_eq!(
            redact_url(&url),
            "postgres://db/cairn?sslmode=require&Password=****",
            "{url:?}"
        );
    }
    // Anything else: no panic, and a URL without secrets stays as it is.
    let _ = redact_url(secret);
}
