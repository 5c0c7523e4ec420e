//! Tests of `config/typed.rs`.

use super::*;
use secrecy::ExposeSecret;

fn load(file: Option<&str>, env: &[(&str, &str)]) -> Result<Config, ConfigErrors> {
    Config::load(&ConfigInput {
        home: PathBuf::from("/h"),
        file: file.map(|t| (PathBuf::from("/h/config.toml"), t.to_string())),
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        system_zone: Some("America/New_York".into()),
        secrets: Default::default(),
    })
}

#[test]
fn trusted_proxies_default_to_loopback_and_bad_ones_are_named() {
    let c = load(None, &[]).unwrap();
    let lo: std::net::IpAddr = "127.0.0.5".parse().unwrap();
    assert!(c.gateway.trusted_proxies.iter().any(|r| r.contains(lo)));
    assert_eq!(c.gateway.trusted_proxies.len(), 2);
    let c = load(Some("[gateway]\ntrusted_proxies = [\"10.0.0.0/8\"]\n"), &[]).unwrap();
    assert!(!c.gateway.trusted_proxies.iter().any(|r| r.contains(lo)));
    let err = load(
        None,
        &[("CAIRN_GATEWAY_TRUSTED_PROXIES", "10.0.0.0/8, nope")],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("gateway.trusted_proxies") && err.contains("\"nope\""),
        "{err}"
    );
}

#[test]
fn defaults_are_usable() {
    let c = load(None, &[]).unwrap();
    assert_eq!(c.agent.max_parallel_jobs, 5);
    assert_eq!(c.agent.max_delegation_depth, 2);
    assert_eq!(c.agent.max_parallel_delegations, 4);
    assert_eq!(c.user.timezone, chrono_tz::America::New_York);
    assert_eq!(c.heartbeat.interval, Duration::from_secs(1800));
    assert!(c.llm.provider.is_none() && !c.llm.api_key.is_configured());
    assert_eq!(c.database_url.expose_secret(), "sqlite:///h/cairn.db");
}

#[test]
fn provider_is_inferred_from_the_key_present() {
    let c = load(None, &[("ANTHROPIC_API_KEY", "ak")]).unwrap();
    assert_eq!(c.llm.provider.as_deref(), Some("anthropic"));
    assert_eq!(c.llm.api_key.get().unwrap().unwrap().expose_secret(), "ak");
    let c = load(
        None,
        &[
            ("ANTHROPIC_API_KEY", "ak"),
            ("OPENAI_API_KEY", "ok"),
            ("CAIRN_LLM_PROVIDER", "anthropic"),
        ],
    )
    .unwrap();
    assert_eq!(c.llm.api_key.get().unwrap().unwrap().expose_secret(), "ak");
    let c = load(
        None,
        &[("CAIRN_LLM_API_KEY", "ck"), ("OPENAI_API_KEY", "ok")],
    )
    .unwrap();
    assert_eq!(c.llm.api_key.get().unwrap().unwrap().expose_secret(), "ck");
}

#[test]
fn range_errors_name_origin_and_key() {
    let err = load(
        Some("[agent]\nmax_parallel_jobs = 0\n"),
        &[
            ("HEARTBEAT_INTERVAL_SECS", "5"),
            ("CAIRN_LLM_PROVIDER", "gemini"),
        ],
    )
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.0.len(), 2, "{text}");
    assert!(
        text.contains("/h/config.toml:2: agent.max_parallel_jobs: must be at least 1"),
        "{text}"
    );
    assert!(text.contains("environment variable HEARTBEAT_INTERVAL_SECS: heartbeat.interval_secs: must be at least 60"), "{text}");
}

#[test]
fn delegation_limits_are_read_and_checked() {
    let c = load(
        Some("[agent]\nmax_delegation_depth = 0\nmax_parallel_delegations = 2\n"),
        &[],
    )
    .unwrap();
    assert_eq!(c.agent.max_delegation_depth, 0);
    assert_eq!(c.agent.max_parallel_delegations, 2);
    let err = load(Some("[agent]\nmax_parallel_delegations = 0\n"), &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/h/config.toml:2: agent.max_parallel_delegations: must be at least 1"),
        "{err}"
    );
}

#[test]
fn debug_output_hides_secrets() {
    let c = load(
        None,
        &[
            ("OPENAI_API_KEY", "sk-very-secret"),
            ("DATABASE_URL", "postgres://u:pw-secret@h/d"),
        ],
    )
    .unwrap();
    let debug = format!("{c:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(!debug.contains("pw-secret"), "{debug}");
}

#[test]
fn debug_output_hides_secrets_from_the_file_and_tables() {
    let text = "[database]\nurl = \"postgres://h/d?sslmode=require&password=pw-query\"\n\
                [llm]\napi_key = \"sk-file-key\"\n\
                [[llm.fallbacks]]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"sk-fallback-key\"\n";
    let input = ConfigInput {
        home: PathBuf::from("/h"),
        file: Some((PathBuf::from("/h/config.toml"), text.to_string())),
        env: [("ANTHROPIC_API_KEY".to_string(), "sk-env-key".to_string())].into(),
        system_zone: None,
        secrets: Default::default(),
    };
    let c = Config::load(&input).unwrap();
    let parsed = super::super::file::parse(std::path::Path::new("/h/config.toml"), text);
    for debug in [
        format!("{c:?}"),
        format!("{input:?}"),
        format!("{parsed:?}"),
    ] {
        for secret in ["sk-file-key", "sk-fallback-key", "sk-env-key", "pw-query"] {
            assert!(!debug.contains(secret), "{secret} shown in {debug}");
        }
    }
}

#[test]
fn an_unset_variable_makes_only_its_secret_unavailable() {
    let file = "[llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"${MYKEY}\"\n";
    let c = load(Some(file), &[]).unwrap();
    assert_eq!(
        c.llm.api_key.get().unwrap_err().to_string(),
        "/h/config.toml:4: llm.api_key: environment variable MYKEY is not set"
    );
    assert_eq!(c.llm.model.as_deref(), Some("m"));
    // The provider's own variable does not stand in for a key the file names.
    let c = load(Some(file), &[("OPENAI_API_KEY", "ok")]).unwrap();
    assert!(c.llm.api_key.get().is_err());
    // An unavailable provider key still says which provider is meant.
    let c = load(Some("[llm]\nanthropic_api_key = \"${AK}\"\n"), &[]).unwrap();
    assert_eq!(c.llm.provider.as_deref(), Some("anthropic"));
    assert!(c.llm.api_key.get().unwrap_err().to_string().contains("AK"));
    // The embeddings key falls back to OpenAI's, unavailable included.
    let c = load(
        Some("[llm]\nopenai_api_key = \"${OK}\"\n[memory]\nembeddings_provider = \"openai\"\n"),
        &[],
    )
    .unwrap();
    assert!(c.memory.embeddings_api_key.get().is_err());
}
