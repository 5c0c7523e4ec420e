//! Shell-word splitting with quotes, and detection of the shell syntax we refuse.
//!
//! The `shell` tool executes programs directly (no `/bin/sh`), so anything a shell
//! would interpret — pipes, chaining, redirection, substitution, expansion, globs —
//! would silently mean something else. We refuse it with a reason instead, so the
//! model can correct the call. In lenient mode (shell syntax allowed by config) the
//! same scanner splits the command into segments so every program can still be
//! checked against the allowlist.

/// A shell construct that the command contains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Construct {
    /// `|`
    Pipe,
    /// `;` or a newline
    Sequence,
    /// `&&` or `||`
    Chain,
    /// a single `&`
    Background,
    /// `>`, `>>`, `<`, `2>&1`, ...
    Redirection,
    /// `` `...` `` or `$(...)`
    CommandSubstitution,
    /// `(...)` or `{ ...; }` grouping
    Subshell,
    /// `$VAR`, `${VAR}`, `$((...))`
    Expansion,
    /// unquoted `*`, `?` or `[`
    Glob,
    /// a leading unquoted `~`
    Tilde,
}

impl Construct {
    /// Why the construct is refused, in words the model can act on.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Pipe => "pipes (`|`) are not allowed; run one program per call",
            Self::Sequence => {
                "command sequences (`;` or newlines) are not allowed; run one program per call"
            }
            Self::Chain => "chaining with `&&` or `||` is not allowed; run one program per call",
            Self::Background => "background execution (`&`) is not allowed",
            Self::Redirection => {
                "redirections (`>`, `<`) are not allowed; use file_write to write files"
            }
            Self::CommandSubstitution => {
                "command substitution (`` `...` `` or `$(...)`) is not allowed"
            }
            Self::Subshell => "subshells and grouping (`(...)`, `{...}`) are not allowed",
            Self::Expansion => {
                "variable expansion (`$NAME`) is not performed; write the value literally"
            }
            Self::Glob => {
                "glob patterns are not expanded (no shell); quote the pattern to pass it literally, or use list_dir"
            }
            Self::Tilde => "`~` is not expanded (no shell); use a path relative to the workspace",
        }
    }

    /// Whether lenient mode (real shell) may still run it; substitution and subshells
    /// hide programs from the allowlist, so they are never allowed.
    pub fn allowed_in_lenient_mode(self) -> bool {
        !matches!(self, Self::CommandSubstitution | Self::Subshell)
    }
}

/// Why a command line could not be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// A quote was opened and never closed.
    #[error("unterminated {0} quote")]
    UnterminatedQuote(&'static str),
    /// The command ends in a lone backslash.
    #[error("the command ends with a dangling backslash")]
    DanglingEscape,
    /// The command has no words.
    #[error("the command is empty")]
    Empty,
    /// The command uses shell syntax that is refused.
    #[error("{}", .0.reason())]
    Refused(Construct),
}

/// A command split into segments (programs separated by operators) of words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    /// Each segment's words; the first word of each is a program.
    pub segments: Vec<Vec<String>>,
    /// The constructs seen (only non-empty in lenient mode).
    pub constructs: Vec<Construct>,
}

/// Splits a command with no shell syntax into words.
pub fn split(command: &str) -> Result<Vec<String>, SplitError> {
    let split = scan(command, false)?;
    split.segments.into_iter().next().ok_or(SplitError::Empty)
}

/// Splits a command that will run under `sh -c` into segments, refusing only
/// constructs that hide programs (substitution, subshells).
pub fn split_lenient(command: &str) -> Result<Split, SplitError> {
    scan(command, true)
}

struct Scanner {
    lenient: bool,
    split: Split,
    words: Vec<String>,
    word: String,
    /// True once the current word has started (so `""` yields an empty word).
    in_word: bool,
}

impl Scanner {
    fn refuse(&mut self, construct: Construct) -> Result<(), SplitError> {
        if self.lenient && construct.allowed_in_lenient_mode() {
            if !self.split.constructs.contains(&construct) {
                self.split.constructs.push(construct);
            }
            Ok(())
        } else {
            Err(SplitError::Refused(construct))
        }
    }

    fn end_word(&mut self) {
        if self.in_word {
            self.words.push(std::mem::take(&mut self.word));
            self.in_word = false;
        }
    }

    fn end_segment(&mut self) {
        self.end_word();
        if !self.words.is_empty() {
            self.split.segments.push(std::mem::take(&mut self.words));
        }
    }

    fn push(&mut self, c: char) {
        self.word.push(c);
        self.in_word = true;
    }
}

fn scan(command: &str, lenient: bool) -> Result<Split, SplitError> {
    let mut s = Scanner {
        lenient,
        split: Split::default(),
        words: Vec::new(),
        word: String::new(),
        in_word: false,
    };
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => s.end_word(),
            '\n' | '\r' | ';' => {
                // A trailing newline is harmless; anything after it is a second command.
                if c != ';' && chars.clone().all(char::is_whitespace) {
                    break;
                }
                s.refuse(Construct::Sequence)?;
                s.end_segment();
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => s.push(next),
                None => return Err(SplitError::DanglingEscape),
            },
            '\'' => {
                s.in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => s.word.push(ch),
                        None => return Err(SplitError::UnterminatedQuote("single")),
                    }
                }
            }
            '"' => {
                s.in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek() {
                            Some(&n @ ('"' | '\\' | '$' | '`')) => {
                                chars.next();
                                s.word.push(n);
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => s.word.push('\\'),
                        },
                        Some('`') => {
                            s.refuse(Construct::CommandSubstitution)?;
                            s.word.push('`');
                        }
                        Some('$') => {
                            match chars.peek() {
                                Some('(') => s.refuse(Construct::CommandSubstitution)?,
                                Some(&n) if n == '{' || n == '_' || n.is_ascii_alphanumeric() => {
                                    s.refuse(Construct::Expansion)?
                                }
                                Some('?' | '#' | '@' | '*' | '!' | '$' | '-') => {
                                    s.refuse(Construct::Expansion)?
                                }
                                _ => {}
                            }
                            s.word.push('$');
                        }
                        Some(ch) => s.word.push(ch),
                        None => return Err(SplitError::UnterminatedQuote("double")),
                    }
                }
            }
            '|' => {
                if chars.peek() == Some(&'|') {
                    chars.next();
                    s.refuse(Construct::Chain)?;
                } else {
                    s.refuse(Construct::Pipe)?;
                }
                s.end_segment();
            }
            '&' => {
                if chars.peek() == Some(&'&') {
                    chars.next();
                    s.refuse(Construct::Chain)?;
                } else if s.word.ends_with('>') || chars.peek() == Some(&'>') {
                    // `2>&1` / `&>`: part of a redirection.
                    s.refuse(Construct::Redirection)?;
                    s.push('&');
                    continue;
                } else {
                    s.refuse(Construct::Background)?;
                }
                s.end_segment();
            }
            '>' | '<' => {
                if chars.peek() == Some(&'(') {
                    // `<(...)` / `>(...)` process substitution.
                    s.refuse(Construct::CommandSubstitution)?;
                }
                s.refuse(Construct::Redirection)?;
                s.push(c);
            }
            '`' => {
                s.refuse(Construct::CommandSubstitution)?;
                s.push(c);
            }
            '$' => {
                match chars.peek() {
                    Some('(') => s.refuse(Construct::CommandSubstitution)?,
                    Some(&n)
                        if n == '{'
                            || n == '_'
                            || n.is_ascii_alphanumeric()
                            || "?#@*!$-'\"".contains(n) =>
                    {
                        s.refuse(Construct::Expansion)?
                    }
                    _ => {}
                }
                s.push(c);
            }
            '(' | ')' => {
                s.refuse(Construct::Subshell)?;
                s.push(c);
            }
            '{' | '}' if !s.in_word && is_word_end(chars.peek().copied()) => {
                s.refuse(Construct::Subshell)?;
                s.push(c);
            }
            '*' | '?' | '[' => {
                s.refuse(Construct::Glob)?;
                s.push(c);
            }
            '~' if !s.in_word => {
                s.refuse(Construct::Tilde)?;
                s.push(c);
            }
            _ => s.push(c),
        }
    }
    s.end_segment();
    if s.split.segments.is_empty() {
        return Err(SplitError::Empty);
    }
    Ok(s.split)
}

fn is_word_end(next: Option<char>) -> bool {
    matches!(next, None | Some(' ' | '\t' | '\n' | ';'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &str) -> Vec<String> {
        split(cmd).unwrap()
    }

    fn refused(cmd: &str) -> Construct {
        match split(cmd) {
            Err(SplitError::Refused(c)) => c,
            other => panic!("{cmd:?} gave {other:?}"),
        }
    }

    #[test]
    fn splits_words_and_quotes() {
        assert_eq!(words("ls -la  src"), ["ls", "-la", "src"]);
        assert_eq!(
            words(r#"echo "a b" 'c d' e\ f"#),
            ["echo", "a b", "c d", "e f"]
        );
        assert_eq!(words(r#"echo "" ''"#), ["echo", "", ""]);
        assert_eq!(
            words(r#"grep -E "a|b;c>d" '$(x)' "\$HOME""#),
            ["grep", "-E", "a|b;c>d", "$(x)", "$HOME"]
        );
        assert_eq!(
            words(r#"find . -name "*.rs""#),
            ["find", ".", "-name", "*.rs"]
        );
        assert_eq!(words("echo a=b,c:d@e%f+g"), ["echo", "a=b,c:d@e%f+g"]);
        assert_eq!(words("echo cost $ 5\n"), ["echo", "cost", "$", "5"]);
        assert_eq!(words("echo a~b x{y}"), ["echo", "a~b", "x{y}"]);
    }

    #[test]
    fn reports_split_errors() {
        assert_eq!(
            split("echo 'abc"),
            Err(SplitError::UnterminatedQuote("single"))
        );
        assert_eq!(
            split("echo \"abc"),
            Err(SplitError::UnterminatedQuote("double"))
        );
        assert_eq!(split("echo \\"), Err(SplitError::DanglingEscape));
        assert_eq!(split("   "), Err(SplitError::Empty));
        assert_eq!(split(""), Err(SplitError::Empty));
    }

    #[test]
    fn refuses_shell_syntax() {
        assert_eq!(refused("ls | sh"), Construct::Pipe);
        assert_eq!(refused("ls; rm -rf /"), Construct::Sequence);
        assert_eq!(refused("ls\nrm x"), Construct::Sequence);
        assert_eq!(refused("ls && rm x"), Construct::Chain);
        assert_eq!(refused("ls || rm x"), Construct::Chain);
        assert_eq!(refused("sleep 9 &"), Construct::Background);
        assert_eq!(refused("echo hi > f"), Construct::Redirection);
        assert_eq!(refused("cat < f"), Construct::Redirection);
        assert_eq!(refused("ls 2>&1"), Construct::Redirection);
        assert_eq!(refused("echo `id`"), Construct::CommandSubstitution);
        assert_eq!(refused("echo $(id)"), Construct::CommandSubstitution);
        assert_eq!(refused("echo \"$(id)\""), Construct::CommandSubstitution);
        assert_eq!(refused("diff <(ls) x"), Construct::CommandSubstitution);
        assert_eq!(refused("(ls)"), Construct::Subshell);
        assert_eq!(refused("{ ls; }"), Construct::Subshell);
        assert_eq!(refused("echo $HOME"), Construct::Expansion);
        assert_eq!(refused("echo \"${HOME}\""), Construct::Expansion);
        assert_eq!(refused("ls *.rs"), Construct::Glob);
        assert_eq!(refused("ls ~/x"), Construct::Tilde);
    }

    #[test]
    fn lenient_mode_splits_segments_but_refuses_hidden_programs() {
        let s = split_lenient("ls -l | grep x && echo done; wc -l < f").unwrap();
        let programs: Vec<&str> = s.segments.iter().map(|w| w[0].as_str()).collect();
        assert_eq!(programs, ["ls", "grep", "echo", "wc"]);
        assert!(s.constructs.contains(&Construct::Pipe));
        assert!(s.constructs.contains(&Construct::Redirection));
        assert_eq!(
            split_lenient("echo $(rm -rf /)"),
            Err(SplitError::Refused(Construct::CommandSubstitution))
        );
        assert_eq!(
            split_lenient("(rm x)"),
            Err(SplitError::Refused(Construct::Subshell))
        );
    }

    #[test]
    fn never_panics_on_odd_input() {
        for cmd in [
            "\\\n", "'", "\"\\", "$", "&", "|", ">", "\u{0}", "é\"ü\"", "a\\\nb", "${", "$((",
        ] {
            let _ = split(cmd);
            let _ = split_lenient(cmd);
        }
    }
}
