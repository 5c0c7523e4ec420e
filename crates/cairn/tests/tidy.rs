//! Tidy: rules of the tree no compiler holds, each a function over a file's
//! path and text (or over the served OpenAPI document), run on the real tree
//! and shown, by a planted violation, to report what it must. A failure
//! names the file and line.
//!
//! - **Dashboard HTML** ([`html_from_strings`]): the dashboard's JS and HTML
//!   (`crates/cairn-gateway/dashboard`) never use `innerHTML`, `outerHTML`,
//!   `insertAdjacentHTML` or `document.write`; elements are built (`dom.js`),
//!   so text is always text. Comment lines are not read.
//! - **The environment** ([`environment_reads`]): production code
//!   (`crates/*/src`) reads the whole environment (`env::vars`,
//!   `env::vars_os`, `vars_os`) only in `crates/cairn/src/environment.rs`,
//!   which reads it once.
//! - **Lint allowances** ([`lint_allowances`]), in every `.rs` file under
//!   `crates/` (`src`, `tests`, `benches`, `build.rs`): a lint is silenced
//!   with `expect`, never `allow`, and always with `reason = "…"`, so a lint
//!   that stops firing shows up as an unfulfilled expectation. Precisely: an
//!   attribute (`#[…]` or `#![…]`, `cfg_attr(…)` included) that names
//!   `expect(` must hold `reason = "`; one that names `allow(` must hold
//!   `reason = "not in every build: …"`. That is the one case `expect` cannot
//!   serve: the lint fires in some builds of the item and not in others (a
//!   test-support module compiled into several test binaries, each using part
//!   of it; a lint that fires under one cfg or feature only), so an `expect`
//!   would be unfulfilled in some. Both `cargo clippy --workspace
//!   --all-targets` runs, with and without `--all-features`, under
//!   `-D warnings`, hold the expectations to being fulfilled.
//! - **File length** ([`overlong`]): no production file (`crates/*/src/**.rs`)
//!   is over 700 lines.
//! - **ARCHITECTURE.md** ([`architecture_problems`]): at most 400 lines, and no
//!   figure with a unit (`12 ms`, `80 KB`, `7,900/s`): measurements live in
//!   docs/performance.md, beside the commands that reproduce them.
//! - **OpenAPI** ([`routine_gaps`]): the document `/api/openapi.json` serves
//!   shows every routine action, trigger and guardrail field cairn-core has
//!   (the derived parity check of `cairn_gateway::openapi::parity`).
#![expect(
    clippy::disallowed_methods,
    reason = "the test reads the tree with blocking std::fs, outside any runtime"
)]

use std::path::{Path, PathBuf};

use cairn_gateway::openapi::parity::{routine_gaps, routine_shape};
use cairn_gateway::openapi::shape::Shape;
use serde_json::Value;

/// The longest a production source file may be, in lines.
const MAX_SOURCE_LINES: usize = 700;
/// The longest ARCHITECTURE.md may be, in lines.
const MAX_ARCHITECTURE_LINES: usize = 400;
/// What writes HTML from a string in a page.
const HTML_WRITERS: [&str; 4] = [
    "innerHTML",
    "outerHTML",
    "insertAdjacentHTML",
    "document.write",
];
/// The one file that reads the whole environment.
const ENVIRONMENT_READER: &str = "crates/cairn/src/environment.rs";
/// Units a measurement carries (ARCHITECTURE.md holds none).
const UNITS: [&str; 7] = ["ms", "MB", "KB", "GB", "µs", "ns", "/s"];
/// The reason an `allow` must give: `expect` cannot serve every build.
const ALLOW_REASON: &str = "not in every build:";

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every file under `dir` (relative to the root) whose name ends in one of
/// `endings`, `target` folders aside, as (path relative to the root, text).
fn files(dir: &str, endings: &[&str]) -> Vec<(String, String)> {
    let root = root();
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a folder entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    pending.push(path);
                }
            } else if endings.iter().any(|e| name.ends_with(e)) {
                let text = std::fs::read_to_string(&path).expect("a UTF-8 file");
                let relative = path.strip_prefix(&root).expect("under the root");
                found.push((relative.to_string_lossy().into_owned(), text));
            }
        }
    }
    found.sort();
    found
}

/// The production sources: `crates/*/src/**.rs`.
fn production_sources() -> Vec<(String, String)> {
    let sources: Vec<_> = files("crates", &[".rs"])
        .into_iter()
        .filter(|(path, _)| path.split('/').nth(2) == Some("src"))
        .collect();
    assert!(
        sources.len() > 100,
        "too few sources found: {}",
        sources.len()
    );
    sources
}

/// Whether a line is only a comment (`//`, `/*`, `*`, `<!--`).
fn is_comment(line: &str) -> bool {
    let line = line.trim_start();
    ["//", "/*", "*", "<!--"]
        .iter()
        .any(|c| line.starts_with(c))
}

/// The dashboard's lines that write HTML from a string.
fn html_from_strings(path: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if is_comment(line) {
            continue;
        }
        for writer in HTML_WRITERS.iter().filter(|w| line.contains(*w)) {
            found.push(format!(
                "{path}:{}: `{writer}` writes HTML from a string; build the elements (dom.js)",
                n + 1
            ));
        }
    }
    found
}

/// The lines of a production file that read the whole environment, unless
/// the file is the one that reads it once.
fn environment_reads(path: &str, text: &str) -> Vec<String> {
    if path == ENVIRONMENT_READER {
        return Vec::new();
    }
    text.lines()
        .enumerate()
        .filter(|(_, line)| !is_comment(line))
        .filter(|(_, line)| line.contains("env::vars") || line.contains("vars_os("))
        .map(|(n, _)| {
            format!(
                "{path}:{}: reads the whole environment; only {ENVIRONMENT_READER} does (once)",
                n + 1
            )
        })
        .collect()
}

/// The byte after the attribute starting at `start` (`#[` or `#![`), string
/// literals skipped.
fn attribute_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let (mut depth, mut in_string, mut i) = (0usize, false, start);
    while i < bytes.len() {
        match (in_string, bytes[i]) {
            (true, b'\\') => i += 1,
            (true, b'"') | (false, b'"') => in_string = !in_string,
            (false, b'[') => depth += 1,
            (false, b']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// `attribute` with its string literals emptied.
fn without_strings(attribute: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::new(), false, false);
    for c in attribute.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                out.push(c);
            }
        } else {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// Whether `code` calls `name(` as a whole word.
fn names(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].trim_start();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && after.starts_with('(')
    })
}

/// The lint allowances of a Rust file that break the rule: an `allow`
/// without `reason = "not in every build: …"`, an `expect` without a reason.
fn lint_allowances(path: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[") || trimmed.starts_with("#![") {
            let start = offset + line.len() - trimmed.len();
            let attribute = &text[start..attribute_end(text, start)];
            let code = without_strings(attribute);
            let reason = attribute
                .split_once("reason")
                .map(|(_, rest)| rest.trim_start())
                .and_then(|rest| rest.strip_prefix('='))
                .and_then(|rest| rest.trim_start().strip_prefix('"'));
            if names(&code, "allow") && !reason.is_some_and(|r| r.starts_with(ALLOW_REASON)) {
                found.push(format!(
                    "{path}:{}: `allow` where `#[expect(…, reason = \"…\")]` works; `allow` only \
                     where the lint fires in some builds and not others, with reason = \"{ALLOW_REASON} …\"",
                    n + 1
                ));
            } else if names(&code, "expect") && reason.is_none() {
                found.push(format!("{path}:{}: `expect` without reason = \"…\"", n + 1));
            }
        }
        offset += line.len();
    }
    found
}

/// A production file over the length limit.
fn overlong(path: &str, text: &str) -> Option<String> {
    let lines = text.lines().count();
    (lines > MAX_SOURCE_LINES).then(|| {
        format!("{path}:{lines}: {lines} lines, over {MAX_SOURCE_LINES}; split the module")
    })
}

/// The first figure with a unit in `line` (`12 ms`, `3/s`).
fn unit_figure(line: &str) -> Option<&str> {
    line.char_indices()
        .filter(|(_, c)| c.is_ascii_digit())
        .find_map(|(at, _)| {
            let after = &line[at + 1..];
            let gap = usize::from(after.starts_with(' '));
            let rest = &after[gap..];
            let unit = UNITS.iter().find(|u| rest.starts_with(*u))?;
            let next = rest[unit.len()..].chars().next();
            let begin = line[..at]
                .trim_end_matches(|c: char| c.is_ascii_digit() || c == ',' || c == '.')
                .len();
            (!next.is_some_and(|c| c.is_alphanumeric() || c == '_'))
                .then(|| &line[begin..at + 1 + gap + unit.len()])
        })
}

/// ARCHITECTURE.md's problems: too long, or a figure with a unit.
fn architecture_problems(path: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_ARCHITECTURE_LINES {
        found.push(format!(
            "{path}:{lines}: {lines} lines, over {MAX_ARCHITECTURE_LINES}; move detail to the code's docs"
        ));
    }
    for (n, line) in text.lines().enumerate() {
        if let Some(figure) = unit_figure(line) {
            found.push(format!(
                "{path}:{}: `{figure}` is a measurement; it belongs in docs/performance.md",
                n + 1
            ));
        }
    }
    found
}

/// Fails naming every problem, one a line.
fn assert_none(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n{}", problems.join("\n"));
}

/// Shows what a check reports for a planted violation.
fn reported(plant: &str, problems: Vec<String>) -> Vec<String> {
    eprintln!("{plant}:\n{}", problems.join("\n"));
    problems
}

#[test]
fn the_dashboard_never_writes_html_from_a_string() {
    let assets = files("crates/cairn-gateway/dashboard", &[".js", ".html"]);
    assert!(assets.len() > 5, "dashboard assets not found: {assets:?}");
    let problems: Vec<_> = assets
        .iter()
        .flat_map(|(p, t)| html_from_strings(p, t))
        .collect();
    assert_none("the dashboard writes HTML from a string", &problems);
}

#[test]
fn planted_inner_html_is_reported() {
    let text = "// innerHTML in a comment is only words\nconst x = 1;\nnode.innerHTML = text;\n";
    let problems = reported(
        "planted innerHTML",
        html_from_strings("crates/cairn-gateway/dashboard/js/planted.js", text),
    );
    assert_eq!(
        problems,
        [
            "crates/cairn-gateway/dashboard/js/planted.js:3: `innerHTML` writes HTML from a string; \
          build the elements (dom.js)"
        ]
    );
    let html = "<p>\n<script>document.write('<b>')</script>\n";
    assert_eq!(html_from_strings("index.html", html).len(), 1);
}

#[test]
fn only_environment_rs_reads_the_whole_environment() {
    let problems: Vec<_> = production_sources()
        .iter()
        .flat_map(|(p, t)| environment_reads(p, t))
        .collect();
    assert_none("production code reads the whole environment", &problems);
    let reader = std::fs::read_to_string(root().join(ENVIRONMENT_READER)).expect("environment.rs");
    assert!(
        reader.contains("vars_os("),
        "{ENVIRONMENT_READER} no longer reads the environment"
    );
}

#[test]
fn planted_env_vars_is_reported() {
    let text = "fn f() {\n    for (k, v) in std::env::vars() {}\n}\n";
    let problems = reported(
        "planted std::env::vars()",
        environment_reads("crates/cairn-agent/src/planted.rs", text),
    );
    assert_eq!(
        problems,
        [
            "crates/cairn-agent/src/planted.rs:2: reads the whole environment; \
          only crates/cairn/src/environment.rs does (once)"
        ]
    );
    let os = "let all = env::vars_os();\n";
    assert_eq!(
        environment_reads("crates/cairn/src/planted.rs", os).len(),
        1
    );
    assert!(environment_reads(ENVIRONMENT_READER, os).is_empty());
}

#[test]
fn lint_allowances_are_expectations_with_reasons() {
    let sources = files("crates", &[".rs"]);
    assert!(
        sources.len() > 200,
        "too few Rust files found: {}",
        sources.len()
    );
    let problems: Vec<_> = sources
        .iter()
        .flat_map(|(p, t)| lint_allowances(p, t))
        .collect();
    assert_none("lint allowances break the rule", &problems);
}

#[test]
fn planted_allow_is_reported() {
    let allow = concat!("#[", "allow(dead_code)]");
    let text = format!("//! A module.\n\n{allow}\nfn unused() {{}}\n");
    let problems = reported(
        "planted #[allow(dead_code)]",
        lint_allowances("crates/cairn-core/src/planted.rs", &text),
    );
    assert_eq!(
        problems,
        [
            "crates/cairn-core/src/planted.rs:3: `allow` where `#[expect(…, reason = \"…\")]` works; \
          `allow` only where the lint fires in some builds and not others, with reason = \"not in \
          every build: …\""
        ]
    );
    let plants = [
        // An allow with any other reason, an inner one, one in cfg_attr, split over lines.
        concat!("#[", "allow(dead_code, reason = \"unused\")]"),
        concat!("    #![", "allow(clippy::unwrap_used)]"),
        concat!("#![cfg_attr(test, ", "allow(clippy::disallowed_methods))]"),
        concat!(
            "#[",
            "allow(\n    clippy::disallowed_methods,\n    reason = \"start-up\"\n)]"
        ),
        // An expectation without a reason.
        concat!("#[", "expect(dead_code)]"),
    ];
    for plant in plants {
        assert_eq!(
            lint_allowances("p.rs", plant).len(),
            1,
            "not reported: {plant}"
        );
    }
    let accepted = [
        concat!(
            "#[",
            "expect(dead_code, reason = \"kept for the next step\")]"
        ),
        concat!(
            "#![",
            "allow(dead_code, reason = \"not in every build: each binary uses part\")]"
        ),
        concat!(
            "#[cfg_attr(test, ",
            "expect(\n    clippy::unwrap_used,\n    reason = \"tests\"\n))]"
        ),
        "#[arg(allow_hyphen_values = true)]",
        "#[doc = \"allow(x) is words here\"]",
        "fn allow(x: u8) {}",
    ];
    for fine in accepted {
        assert_eq!(
            lint_allowances("p.rs", fine),
            Vec::<String>::new(),
            "reported: {fine}"
        );
    }
}

#[test]
fn no_production_file_is_over_700_lines() {
    let problems: Vec<_> = production_sources()
        .iter()
        .filter_map(|(p, t)| overlong(p, t))
        .collect();
    assert_none("production files over the limit", &problems);
}

#[test]
fn planted_701_line_file_is_reported() {
    let text = "fn f() {}\n".repeat(MAX_SOURCE_LINES + 1);
    let problem = overlong("crates/cairn-store/src/planted.rs", &text);
    reported("planted 701-line file", problem.iter().cloned().collect());
    assert_eq!(
        problem.as_deref(),
        Some("crates/cairn-store/src/planted.rs:701: 701 lines, over 700; split the module")
    );
    let fits = "fn f() {}\n".repeat(MAX_SOURCE_LINES);
    assert_eq!(overlong("crates/cairn-store/src/planted.rs", &fits), None);
}

#[test]
fn architecture_md_is_short_and_holds_no_measurements() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    assert_none(
        "ARCHITECTURE.md",
        &architecture_problems("ARCHITECTURE.md", &text),
    );
}

#[test]
fn planted_measurement_and_length_in_architecture_are_reported() {
    let mut text = "The engine wakes every 500 ms; a slot costs 2KB.\n".to_owned();
    text.push_str(&"A line.\n".repeat(MAX_ARCHITECTURE_LINES));
    let problems = reported(
        "planted ARCHITECTURE.md",
        architecture_problems("ARCHITECTURE.md", &text),
    );
    assert_eq!(
        problems,
        [
            "ARCHITECTURE.md:401: 401 lines, over 400; move detail to the code's docs",
            "ARCHITECTURE.md:1: `500 ms` is a measurement; it belongs in docs/performance.md",
        ]
    );
    for (line, figure) in [
        ("7,900/s", Some("7,900/s")),
        ("80 µs", Some("80 µs")),
        ("3 GB.", Some("3 GB")),
    ] {
        assert_eq!(unit_figure(line), figure, "{line}");
    }
    for words in ["2 msgs", "the 5 MBps", "v2 notes", "ms and MB alone"] {
        assert_eq!(unit_figure(words), None, "{words}");
    }
}

#[test]
fn the_openapi_document_shows_every_routine_field() {
    let doc = cairn_gateway::server::openapi_json();
    assert_none("the OpenAPI document lacks", &routine_gaps(&doc));
}

/// The component a `$ref` schema names.
fn component<'a>(doc: &'a mut Value, schema: &Value) -> &'a mut Value {
    let name = schema["$ref"]
        .as_str()
        .expect("a $ref")
        .rsplit('/')
        .next()
        .expect("a name");
    &mut doc["components"]["schemas"][name]
}

/// `doc` without the routine action `name`: the member of the action union
/// whose tag is `name` removed.
fn without_action(doc: &Value, name: &str) -> Value {
    let Shape::Object { fields, .. } = routine_shape() else {
        panic!("a routine spec is an object");
    };
    let Shape::Tagged { tag, .. } = &fields["action"] else {
        panic!("a routine's action is a tagged union");
    };
    let mut doc = doc.clone();
    let union = doc["components"]["schemas"]["RoutineSpec"]["properties"]["action"].clone();
    let members = component(&mut doc, &union)["oneOf"]
        .as_array()
        .expect("oneOf")
        .clone();
    let kept: Vec<Value> = members
        .into_iter()
        .filter(|member| component(&mut doc.clone(), member)["properties"][tag]["enum"][0] != name)
        .collect();
    component(&mut doc, &union)["oneOf"] = Value::Array(kept);
    doc
}

#[test]
fn planted_openapi_document_without_the_watch_action_is_reported() {
    let doc = without_action(&cairn_gateway::server::openapi_json(), "watch");
    let problems = reported("planted OpenAPI without `watch`", routine_gaps(&doc));
    assert!(
        problems.contains(&"POST /api/routines.action: the type `watch` is missing".to_owned()),
        "{problems:#?}"
    );
}
