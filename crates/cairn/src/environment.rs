//! The process's environment, read once. `std::env`'s `vars` panics on a
//! variable that is not valid UTF-8 (a stray byte in someone's shell
//! profile); this reads `vars_os` instead, leaves such a variable out with
//! one warning naming it (lossily, never its value), and every part of
//! cairn gets the result through the [`Config`](cairn_core::config::Config)
//! (`config.env()`), not from the process again.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::OnceLock;

use cairn_core::config::Environment;

static ENVIRONMENT: OnceLock<Environment> = OnceLock::new();

/// The environment, read at the first call (and only then).
pub fn get() -> Environment {
    ENVIRONMENT
        .get_or_init(|| Environment::new(read(std::env::vars_os(), warn)))
        .clone()
}

fn warn(name: &str) {
    tracing::warn!(
        variable = %name,
        "an environment variable is not valid UTF-8; cairn leaves it out"
    );
}

/// The UTF-8 variables of `vars`; `skipped` is told the name of each other one.
fn read(
    vars: impl Iterator<Item = (OsString, OsString)>,
    skipped: impl Fn(&str),
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in vars {
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => {
                out.insert(name, value);
            }
            (Ok(name), Err(_)) => skipped(&name),
            (Err(name), _) => skipped(&name.to_string_lossy()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    #[test]
    fn variables_that_are_not_utf8_are_left_out_and_named() {
        let vars = vec![
            (OsString::from("GOOD"), OsString::from("yes")),
            (
                OsString::from("BAD"),
                OsString::from_vec(b"\xff\xfe".to_vec()),
            ),
            (OsString::from_vec(b"N\xffME".to_vec()), OsString::from("v")),
        ];
        let named = std::cell::RefCell::new(Vec::new());
        let got = read(vars.into_iter(), |n| named.borrow_mut().push(n.to_string()));
        assert_eq!(got.keys().collect::<Vec<_>>(), ["GOOD"]);
        assert_eq!(*named.borrow(), ["BAD", "N\u{FFFD}ME"]);
    }
}
