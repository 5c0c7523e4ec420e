//! Fuzzes routine specs (YAML and JSON): parsing and validation never panic,
//! and a parsed spec round-trips through its YAML and JSON forms unchanged.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run routine_spec -- -dict=routine.dict -max_total_time=240`

#![no_main]

use cairn_core::routine::{RoutineSpec, SpecFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    // JSON is YAML too: both parsers see every input.
    for format in [SpecFormat::Yaml, SpecFormat::Json] {
        if let Ok(spec) = RoutineSpec::parse(text, format) {
            check(&spec);
        }
    }
});

/// Validation does not panic, and the spec survives YAML and JSON unchanged.
fn check(spec: &RoutineSpec) {
    let valid = spec.validate().is_ok();

    let yaml = spec
        .to_yaml()
        .unwrap_or_else(|e| panic!("{spec:?} does not serialize to YAML: {e}"));
    let back = RoutineSpec::parse(&yaml, SpecFormat::Yaml)
        .unwrap_or_else(|e| panic!("{yaml:?} does not parse back: {e}"));
    assert_eq!(&back, spec, "YAML {yaml:?} round-trips to something else");
    assert_eq!(
        back.validate().is_ok(),
        valid,
        "validity changed through YAML"
    );

    let json = serde_json::to_string(spec)
        .unwrap_or_else(|e| panic!("{spec:?} does not serialize to JSON: {e}"));
    let back = RoutineSpec::parse(&json, SpecFormat::Json)
        .unwrap_or_else(|e| panic!("{json:?} does not parse back: {e}"));
    assert_eq!(&back, spec, "JSON {json:?} round-trips to something else");
}
