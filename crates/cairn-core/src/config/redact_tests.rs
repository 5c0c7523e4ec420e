//! Tests of `config/redact.rs`.

use super::*;

#[test]
fn channel_credentials_are_hidden() {
    let v = serde_json::json!({
        "team": {"type": "slack", "webhook_url": "https://hooks.example.org/T0/B0/S3CR"},
        "ops": {"type": "webhook", "url": "https://u:S3CR@example.org/h?token=S3CR",
                "headers": {"Authorization": "Bearer S3CR", "X-Team": "S3CR-ops"}},
        "push": {"type": "ntfy", "topic": "S3CR-alerts"},
    });
    let shown = redact_json(&v).to_string();
    assert!(!shown.contains("S3CR"), "{shown}");
    assert!(
        shown.contains("X-Team") && shown.contains("example.org"),
        "{shown}"
    );
}

#[test]
fn mcp_server_env_and_headers_are_hidden() {
    let v = serde_json::json!([
        {"name": "gh", "command": "npx", "args": ["-y", "server-github"],
         "env": {"GITHUB_PERSONAL_ACCESS": "S3CR", "DB_PASS": "S3CR"}},
        {"name": "remote", "url": "https://example.org/mcp?access_token=S3CR",
         "headers": {"Authorization": "Bearer S3CR", "X-Api": "S3CR"}},
    ]);
    let shown = redact_json(&v).to_string();
    assert!(!shown.contains("S3CR"), "{shown}");
    for kept in ["DB_PASS", "X-Api", "server-github", "example.org"] {
        assert!(shown.contains(kept), "{kept} in {shown}");
    }
}

#[test]
fn redacts_secret_fields_in_tables() {
    let v = serde_json::json!([{"model": "m", "api_key": "sk-1", "nested": {"auth_token": "t"}}]);
    assert_eq!(
        redact_json(&v),
        serde_json::json!([{"model": "m", "api_key": "********", "nested": {"auth_token": "********"}}])
    );
}

/// (input, expected display); the secret in each is spelt with `S3CR`.
const URLS: &[(&str, &str)] = &[
    (
        "postgres://cairn:S3CRet@db:5432/cairn",
        "postgres://cairn:****@db:5432/cairn",
    ),
    ("postgres://cairn@db/cairn", "postgres://cairn@db/cairn"),
    ("postgres://db:5432/cairn", "postgres://db:5432/cairn"),
    ("sqlite:///home/a/cairn.db", "sqlite:///home/a/cairn.db"),
    ("sqlite:///home/a@b/c:d.db", "sqlite:///home/a@b/c:d.db"),
    ("sqlite://cairn.db?mode=rwc", "sqlite://cairn.db?mode=rwc"),
    ("sqlite:cairn.db", "sqlite:cairn.db"),
    ("not a url", "not a url"),
    // Passwords holding characters userinfo should encode but people type raw.
    ("postgres://u:S3CR/et@h/db", "postgres://u:****@h/db"),
    ("postgres://u:S3CR@et@h/db", "postgres://u:****@h/db"),
    (
        "postgres://u:S3CR:et@h:5432/db",
        "postgres://u:****@h:5432/db",
    ),
    ("postgres://u:S3CR?et@h/db", "postgres://u:****@h/db"),
    ("postgres://u:S3CR#et@h/db", "postgres://u:****@h/db"),
    ("postgres://u:S3CR/?#@:et@h/db", "postgres://u:****@h/db"),
    ("postgres://u:S3CR%2Fet%40@h/db", "postgres://u:****@h/db"),
    ("postgres://:S3CRet@h/db", "postgres://:****@h/db"),
    (
        "postgres://u:S3CRet@/db?host=/run/pg",
        "postgres://u:****@/db?host=/run/pg",
    ),
    (
        "postgres://u:S3CRet@[::1]:5432/db",
        "postgres://u:****@[::1]:5432/db",
    ),
    ("postgres://[::1]:5432/db", "postgres://[::1]:5432/db"),
    // Secrets in the query, any case, percent-encoded names, several of them.
    (
        "postgres://h/db?sslmode=require&password=S3CR",
        "postgres://h/db?sslmode=require&password=****",
    ),
    (
        "postgres://u@h/db?PASSWORD=S3CR&sslmode=require",
        "postgres://u@h/db?PASSWORD=****&sslmode=require",
    ),
    ("postgres://h/db?pass=S3CR", "postgres://h/db?pass=****"),
    ("postgres://h/db?pwd=S3CR", "postgres://h/db?pwd=****"),
    ("postgres://h/db?Token=S3CR", "postgres://h/db?Token=****"),
    (
        "postgres://h/db?api_key=S3CR",
        "postgres://h/db?api_key=****",
    ),
    ("postgres://h/db?apiKey=S3CR", "postgres://h/db?apiKey=****"),
    ("postgres://h/db?secret=S3CR", "postgres://h/db?secret=****"),
    ("postgres://h/db?key=S3CR", "postgres://h/db?key=****"),
    (
        "postgres://h/db?access_token=S3CR",
        "postgres://h/db?access_token=****",
    ),
    (
        "postgres://h/db?sslpassword=S3CR",
        "postgres://h/db?sslpassword=****",
    ),
    (
        "postgres://h/db?pass%77ord=S3CR",
        "postgres://h/db?pass%77ord=****",
    ),
    (
        "postgres://h/db?password=S3CR#x&y",
        "postgres://h/db?password=****",
    ),
    (
        "postgres://h/db?password=S3CR&S3CR&sslmode=disable",
        "postgres://h/db?password=****&sslmode=disable",
    ),
    (
        "postgres://u:S3CR@h/db?password=S3CR",
        "postgres://u:****@h/db?password=****",
    ),
    ("sqlite:cairn.db?key=S3CR", "sqlite:cairn.db?key=****"),
    (
        "postgres://h/db?sslmode=require",
        "postgres://h/db?sslmode=require",
    ),
];

#[test]
fn redacts_url_secrets_in_userinfo_and_query() {
    let mut wrong = Vec::new();
    for (url, want) in URLS {
        let got = redact_url(url);
        if got != *want || got.contains("S3CR") {
            wrong.push(format!("{url} -> {got} (want {want})"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// (input, expected display) of URLs other than databases': every query
/// value, the user info whole, a fragment, a bot token.
const WEB_URLS: &[(&str, &str)] = &[
    (
        "https://hooks.example/h?sig=S3CR&v=S3CR",
        "https://hooks.example/h?sig=****&v=****",
    ),
    (
        "http://127.0.0.1:9/mcp?token=S3CR&x=",
        "http://127.0.0.1:9/mcp?token=****&x=",
    ),
    (
        "https://ghp_S3CR@github.com/o/r.git",
        "https://****@github.com/o/r.git",
    ),
    ("https://u:S3CR@example.org/h", "https://****@example.org/h"),
    ("https://h/cb#access_token=S3CR", "https://h/cb#****"),
    (
        "https://api.telegram.org/bot123:S3CR/getMe",
        "https://api.telegram.org/bot****/getMe",
    ),
    ("https://example.org/a/b", "https://example.org/a/b"),
    ("https://example.org/robots?", "https://example.org/robots?"),
    // Connection options are shown for databases only.
    (
        "https://example.org/?sslmode=S3CR",
        "https://example.org/?sslmode=****",
    ),
];

#[test]
fn every_query_value_and_the_user_info_of_other_urls_are_hidden() {
    for (url, want) in WEB_URLS {
        assert_eq!(redact_url(url), *want, "{url}");
    }
}

#[test]
fn urls_in_text_are_found_wherever_they_stand() {
    let cases = [
        (
            "error sending request for url (http://127.0.0.1:1/mcp?token=S3CR&x=plain), when",
            "error sending request for url (http://127.0.0.1:1/mcp?token=****&x=****), when",
        ),
        (
            r#"{"error":"url: \"https://u:S3CR@h/x?k=S3CR\" refused"}"#,
            r#"{"error":"url: \"https://****@h/x?k=****\" refused"}"#,
        ),
        ("see <https://h/?a=S3CR>.", "see <https://h/?a=****>."),
        (
            "at https://h/?key=S3CR, model m.",
            "at https://h/?key=****, model m.",
        ),
        (
            "two: wss://h/s?t=S3CR and postgres://u:S3CR@db/x?sslmode=require",
            "two: wss://h/s?t=**** and postgres://u:****@db/x?sslmode=require",
        ),
        ("no url here: a://", "no url here: a://"),
        ("://S3CR?x=1 is not a URL", "://S3CR?x=1 is not a URL"),
    ];
    for (text, want) in cases {
        let got = redact_text(text);
        assert!(got.starts_with(want), "{text}\n-> {got}\nwant {want}");
    }
    assert!(!redact_text(cases[0].0).contains("plain"));
}

#[test]
fn values_after_secret_flags_and_bearer_are_hidden() {
    let prose = [
        ("run --token S3CR now", "run --token ******** now"),
        ("run --api-key=S3CR now", "run --api-key=******** now"),
        (
            "--password 'S3CR with spaces' next",
            "--password ******** next",
        ),
        ("--secret=\"S3CR S3CR\" next", "--secret=******** next"),
        (
            "Authorization: Bearer S3CR",
            "Authorization: Bearer ********",
        ),
        // Prose about tokens is not a token.
        (
            "missing bearer token: send Authorization: Bearer <token>",
            "missing bearer token: send Authorization: Bearer <token>",
        ),
        ("Bearer sk-S3CR.", "Bearer ********"),
        // Prose keeps what only a command line would mean.
        ("mkdir -p dir; the token=abc", "mkdir -p dir; the token=abc"),
        ("--name laptop", "--name laptop"),
    ];
    for (text, want) in prose {
        assert_eq!(redact_text(text), want, "{text}");
    }
    let commands = [
        (
            "API_TOKEN=S3CR /usr/bin/hook -p S3CR --user me",
            "API_TOKEN=******** /usr/bin/hook -p ******** --user me",
        ),
        (
            "curl -H 'Authorization: Bearer S3CR' -u me:S3CR https://h/x?k=S3CR",
            "curl -H ******** -u ******** https://h/x?k=****",
        ),
        ("redis-cli -a S3CR ping", "redis-cli -a ******** ping"),
        ("/bin/hook  --keep  spaces", "/bin/hook  --keep  spaces"),
    ];
    for (text, want) in commands {
        assert_eq!(redact_command(text), want, "{text}");
    }
}

#[test]
fn mcp_args_hide_the_argument_after_a_secret_flag() {
    let args = [
        "-y",
        "server",
        "--token",
        "S3CR with space",
        "--api-key=S3CR",
        "-p",
        "S3CR",
        "--password",
        "S3CR",
        "DB_PASSWORD=S3CR",
        "--url",
        "https://h/?key=S3CR",
        "plain",
    ];
    let shown = redact_args(&args);
    assert_eq!(
        shown,
        [
            "-y",
            "server",
            "--token",
            "********",
            "--api-key=********",
            "-p",
            "********",
            "--password",
            "********",
            "DB_PASSWORD=********",
            "--url",
            "https://h/?key=****",
            "plain",
        ]
    );
    let table = serde_json::json!({"servers": [{"command": "/bin/s --secret S3CR", "args": args}]});
    let shown = redact_json(&table).to_string();
    assert!(!shown.contains("S3CR"), "{shown}");
    assert!(shown.contains("/bin/s --secret"), "{shown}");
}

#[test]
fn a_host_named_like_a_bot_token_is_a_host() {
    assert_eq!(redact_url("http://bot1:8080/x"), "http://bot1:8080/x");
}
