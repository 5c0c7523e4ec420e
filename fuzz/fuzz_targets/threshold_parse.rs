//! Fuzzes threshold expressions (cairn-core `threshold`): nothing may panic or
//! overflow the stack; a parsed expression's normalized text parses back to
//! the same expression and prints the same; evaluation against a fixed JSON
//! result never panics, and `not e` is the opposite of `e` when `e` evaluates.
//!
//! Run: `RUSTC_BOOTSTRAP=1 cargo fuzz run threshold_parse -- -dict=threshold.dict -max_total_time=240`

#![no_main]

use cairn_core::threshold::{self, Expr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(expr) = threshold::parse(&text) else {
        return;
    };
    let normalized = expr.to_string();
    let back = threshold::parse(&normalized)
        .unwrap_or_else(|e| panic!("{text:?} -> {normalized:?} does not parse back: {e}"));
    assert_eq!(back, expr, "{text:?} -> {normalized:?} round-trips to something else");
    assert_eq!(back.to_string(), normalized, "normalized text is not a fixed point");
    let result = serde_json::json!({
        "status_code": 500, "count": 7, "ratio": 0.5, "ok": true, "error": null,
        "status": "failed", "data": {"status": "ok", "0": 1}, "items": [{"id": 1}, [2, "x"]],
    });
    let direct = expr.eval(&result);
    let negated = Expr::Not(Box::new(expr)).eval(&result);
    match (direct, negated) {
        (Ok(a), Ok(b)) => assert_eq!(a, !b, "{text:?}: not does not negate"),
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("{text:?}: {a:?} vs not: {b:?}"),
    }
});
