//! A secret's value: typed at the terminal with echo off, or read whole
//! from stdin when it is not a terminal (one trailing newline dropped).

use std::io::{IsTerminal, Read, Write};

use anyhow::Context;
use secrecy::SecretString;

use crate::exit::BadInput;

/// The value for `name`, never empty.
pub fn value(name: &str) -> anyhow::Result<SecretString> {
    let stdin = std::io::stdin();
    let text = if stdin.is_terminal() {
        eprint!("value of {name} (not shown): ");
        std::io::stderr().flush()?;
        let typed = without_echo(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        eprintln!();
        typed.context("cannot read the value from the terminal")?
    } else {
        let mut text = String::new();
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("cannot read the value from stdin (it must be UTF-8 text)")?;
        text
    };
    let value = trim_newline(text);
    if value.is_empty() {
        return Err(BadInput(format!("no value given for {name}; nothing stored")).into());
    }
    Ok(SecretString::from(value))
}

/// `text` without one trailing `\n` or `\r\n` (what `echo` and the Enter key add).
fn trim_newline(mut text: String) -> String {
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    text
}

/// Runs `read` with the terminal's echo off, put back after (even on error).
fn without_echo<T>(read: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let before = tcgetattr(&stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    tcsetattr(&stdin, OptionalActions::Now, &quiet)?;
    let result = read();
    tcsetattr(&stdin, OptionalActions::Now, &before)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trailing_newline_is_dropped() {
        assert_eq!(trim_newline("s3cr3t\n".into()), "s3cr3t");
        assert_eq!(trim_newline("s3cr3t\r\n".into()), "s3cr3t");
        assert_eq!(trim_newline("s3cr3t".into()), "s3cr3t");
        assert_eq!(trim_newline("a\n\n".into()), "a\n");
    }
}
