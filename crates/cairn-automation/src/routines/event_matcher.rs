//! Which event routines an inbound chat message fires.
//!
//! Every pattern of every enabled event routine is compiled into one
//! [`regex::RegexSet`], so a message is scanned once however many routines
//! there are; each routine's optional channel filter is checked on the
//! patterns that matched. Matching is **case-sensitive as written**: a
//! routine that wants otherwise writes `(?i)` in its pattern. A pattern
//! matches anywhere in the text unless it anchors itself (`^…$`).
//!
//! Speed: the set's lazy DFA matches a message in a few µs, but a Unicode
//! word boundary (`\b`) makes it give up on non-ASCII text, and the
//! fallback takes milliseconds with thousands of patterns. So patterns with
//! a Unicode word boundary are kept out of the set: each is checked alone,
//! and only when the message contains one of the literals every match of it
//! must start with (an Aho-Corasick scan finds those in one pass). The few
//! such patterns with no usable literal share a second set. Results are the
//! same as matching each pattern alone (the tests compare).
//!
//! The matcher is immutable: when routines change, the engine builds a new
//! one and swaps an `Arc`, so matching never waits on a rebuild.

use std::fmt;

use aho_corasick::AhoCorasick;
use cairn_core::routine::{Routine, Trigger};
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use regex_syntax::hir::literal::Extractor;
use regex_syntax::hir::{Hir, HirKind, Look};
use uuid::Uuid;

/// Most memory one pattern may compile to (shared with routine validation).
pub const PATTERN_SIZE_LIMIT: usize = cairn_core::routine::EVENT_PATTERN_SIZE_LIMIT;

/// Cap on the lazy DFA's state cache of the combined set (allocated as
/// states are built, not up front). With 10,000 patterns each DFA state is
/// large: at 32 MiB the cache thrashes and the search falls back to the NFA
/// simulation (~20 ms a message instead of ~5 µs, measured by the bench).
const SET_DFA_SIZE_LIMIT: usize = 128 << 20;

/// One event routine as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPattern {
    /// The routine's id, returned by [`EventMatcher::matches`].
    pub id: Uuid,
    /// The routine's name, for errors.
    pub name: String,
    /// Only messages from this channel (any channel when `None`).
    pub channel: Option<String>,
    /// The regular expression, as written.
    pub pattern: String,
}

impl EventPattern {
    /// The routine's event pattern, if it is an enabled event routine.
    pub fn from_routine(routine: &Routine) -> Option<Self> {
        match &routine.spec.trigger {
            Trigger::Event { channel, pattern } if routine.spec.enabled => Some(Self {
                id: routine.id,
                name: routine.spec.name.clone(),
                channel: channel.clone(),
                pattern: pattern.clone(),
            }),
            _ => None,
        }
    }
}

/// Why a pattern cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatternProblem {
    /// The pattern is empty, so it would match every message.
    Empty,
    /// The regex crate could not parse it; its message.
    Syntax(String),
    /// It compiles to more than [`PATTERN_SIZE_LIMIT`] bytes.
    TooBig {
        /// The limit it exceeds, in bytes.
        limit: usize,
    },
}

impl fmt::Display for PatternProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PatternProblem::Empty => f.write_str("it is empty and would match every message"),
            PatternProblem::Syntax(msg) => write!(f, "invalid regular expression: {msg}"),
            PatternProblem::TooBig { limit } => write!(
                f,
                "it compiles to more than {} KiB (large repetition counts such as {{1000}} \
                 multiply); simplify it",
                limit / 1024
            ),
        }
    }
}

/// An event routine's pattern that cannot be compiled, naming the routine and the pattern.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("routine \"{routine}\": event pattern `{pattern}`: {problem}")]
pub struct PatternError {
    /// The routine's id (`None` when validating a routine not yet stored).
    pub routine_id: Option<Uuid>,
    /// The routine's name.
    pub routine: String,
    /// The pattern as written.
    pub pattern: String,
    /// What is wrong with it.
    pub problem: PatternProblem,
}

/// Checks one routine's event pattern the way [`EventMatcher::build`] will,
/// so `routine apply` can refuse it before anything is written.
pub fn validate_pattern(routine: &str, pattern: &str) -> Result<(), PatternError> {
    check(None, routine, pattern).map(drop)
}

fn check(routine_id: Option<Uuid>, routine: &str, pattern: &str) -> Result<Regex, PatternError> {
    let problem = if pattern.is_empty() {
        PatternProblem::Empty
    } else {
        match compile(pattern) {
            Ok(regex) => return Ok(regex),
            Err(err) => problem_of(err),
        }
    };
    Err(PatternError {
        routine_id,
        routine: routine.to_string(),
        pattern: pattern.to_string(),
        problem,
    })
}

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

fn problem_of(err: regex::Error) -> PatternProblem {
    match err {
        regex::Error::CompiledTooBig(limit) => PatternProblem::TooBig { limit },
        // The syntax message is multi-line (the pattern with a caret under
        // the fault, then the reason); the error already quotes the pattern.
        regex::Error::Syntax(msg) => PatternProblem::Syntax(
            msg.lines()
                .last()
                .map(|l| l.trim().trim_start_matches("error: ").to_string())
                .unwrap_or(msg),
        ),
        other => PatternProblem::Syntax(other.to_string()),
    }
}

/// All enabled event routines' patterns, compiled for matching in one pass.
#[derive(Debug, Clone)]
pub struct EventMatcher {
    /// Patterns without a Unicode word boundary: the lazy DFA handles them
    /// on any text.
    plain: Group,
    /// Patterns with a Unicode word boundary and no usable literal.
    bounded: Group,
    /// Patterns with a Unicode word boundary, checked alone when one of
    /// their literals occurs in the message.
    literal: Option<Literal>,
    /// Per global index (sorted by routine id): the routine and its channel filter.
    routines: Vec<(Uuid, Option<String>)>,
}

/// Some patterns in one set, with their global indices.
#[derive(Debug, Clone)]
struct Group {
    set: RegexSet,
    indices: Vec<usize>,
}

impl Group {
    fn empty() -> Self {
        Self {
            set: RegexSet::empty(),
            indices: Vec::new(),
        }
    }

    fn build(patterns: &[(usize, &str)]) -> Result<Self, regex::Error> {
        if patterns.is_empty() {
            // A set with a size limit of 0 bytes would refuse even nothing.
            return Ok(Self::empty());
        }
        let set = RegexSetBuilder::new(patterns.iter().map(|(_, p)| *p))
            .size_limit(PATTERN_SIZE_LIMIT.saturating_mul(patterns.len()))
            .dfa_size_limit(SET_DFA_SIZE_LIMIT)
            .build()?;
        Ok(Self {
            set,
            indices: patterns.iter().map(|(i, _)| *i).collect(),
        })
    }

    fn matches_into(&self, text: &str, out: &mut Vec<usize>) {
        if self.indices.is_empty() {
            return;
        }
        out.extend(
            self.set
                .matches(text)
                .into_iter()
                .filter_map(|i| self.indices.get(i)),
        );
    }
}

/// Patterns found through their literals.
#[derive(Debug, Clone)]
struct Literal {
    scanner: AhoCorasick,
    /// Per literal: the patterns (positions in `regexes`) that start with it.
    owners: Vec<Vec<usize>>,
    /// Each pattern alone, with its global index.
    regexes: Vec<(usize, Regex)>,
}

impl Literal {
    fn matches_into(&self, text: &str, out: &mut Vec<usize>) {
        let mut candidates: Vec<usize> = self
            .scanner
            .find_overlapping_iter(text)
            .filter_map(|m| self.owners.get(m.pattern().as_usize()))
            .flatten()
            .copied()
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        for c in candidates {
            if let Some((index, regex)) = self.regexes.get(c)
                && regex.is_match(text)
            {
                out.push(*index);
            }
        }
    }
}

/// Whether the pattern asserts a Unicode word boundary anywhere.
fn has_unicode_boundary(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Look(look) => matches!(
            look,
            Look::WordUnicode
                | Look::WordUnicodeNegate
                | Look::WordStartUnicode
                | Look::WordEndUnicode
                | Look::WordStartHalfUnicode
                | Look::WordEndHalfUnicode
        ),
        HirKind::Repetition(rep) => has_unicode_boundary(&rep.sub),
        HirKind::Capture(cap) => has_unicode_boundary(&cap.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => subs.iter().any(has_unicode_boundary),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
    }
}

/// Literals one of which starts every match of the pattern, if there is a
/// finite set of non-empty ones (a necessary condition, never sufficient).
fn prefix_literals(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let seq = Extractor::new().extract(hir);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().is_empty()) {
        return None;
    }
    Some(literals.iter().map(|l| l.as_bytes().to_vec()).collect())
}

/// How a pattern is matched; `None` when it goes into the main set.
fn literals_if_bounded(pattern: &str) -> Option<Option<Vec<Vec<u8>>>> {
    // The pattern already compiled, so it parses; a parse failure here
    // would only put it in the main set, which is always correct.
    let hir = regex_syntax::parse(pattern).ok()?;
    has_unicode_boundary(&hir).then(|| prefix_literals(&hir))
}

impl EventMatcher {
    /// A matcher that matches nothing.
    pub fn empty() -> Self {
        Self {
            plain: Group::empty(),
            bounded: Group::empty(),
            literal: None,
            routines: Vec::new(),
        }
    }

    /// Compiles the patterns; every bad pattern is reported, not just the first.
    pub fn build(
        patterns: impl IntoIterator<Item = EventPattern>,
    ) -> Result<EventMatcher, Vec<PatternError>> {
        let mut patterns: Vec<EventPattern> = patterns.into_iter().collect();
        // Sorting by id makes the result order independent of the input's.
        patterns.sort_by_key(|p| p.id);
        // Each pattern is compiled on its own first so a failure names its
        // routine and one pathological pattern cannot use the others' budget.
        let mut errors = Vec::new();
        let mut compiled = Vec::with_capacity(patterns.len());
        for p in &patterns {
            match check(Some(p.id), &p.name, &p.pattern) {
                Ok(regex) => compiled.push(regex),
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        if patterns.is_empty() {
            return Ok(Self::empty());
        }
        let mut plain = Vec::new();
        let mut bounded = Vec::new();
        let mut literals: std::collections::HashMap<Vec<u8>, Vec<usize>> =
            std::collections::HashMap::new();
        let mut regexes = Vec::new();
        for (index, (p, regex)) in patterns.iter().zip(compiled).enumerate() {
            match literals_if_bounded(&p.pattern) {
                None => plain.push((index, p.pattern.as_str())),
                Some(None) => bounded.push((index, p.pattern.as_str())),
                Some(Some(lits)) => {
                    let position = regexes.len();
                    regexes.push((index, regex));
                    for lit in lits {
                        let owners = literals.entry(lit).or_default();
                        if owners.last() != Some(&position) {
                            owners.push(position);
                        }
                    }
                }
            }
        }
        let together = |err: regex::Error| {
            // Unreachable in practice (each pattern compiled alone within
            // its share), but reported rather than assumed.
            vec![PatternError {
                routine_id: None,
                routine: format!("{} event routines together", patterns.len()),
                pattern: "(all event patterns)".to_string(),
                problem: problem_of(err),
            }]
        };
        let plain = Group::build(&plain).map_err(together)?;
        let bounded = Group::build(&bounded).map_err(together)?;
        let literal = if regexes.is_empty() {
            None
        } else {
            let (keys, owners): (Vec<Vec<u8>>, Vec<Vec<usize>>) = literals.into_iter().unzip();
            let scanner = AhoCorasick::new(&keys).map_err(|e| {
                vec![PatternError {
                    routine_id: None,
                    routine: format!("{} event routines together", patterns.len()),
                    pattern: "(literals of event patterns)".to_string(),
                    problem: PatternProblem::Syntax(e.to_string()),
                }]
            })?;
            Some(Literal {
                scanner,
                owners,
                regexes,
            })
        };
        let routines = patterns.into_iter().map(|p| (p.id, p.channel)).collect();
        Ok(EventMatcher {
            plain,
            bounded,
            literal,
            routines,
        })
    }

    /// How many routines the matcher holds.
    pub fn len(&self) -> usize {
        self.routines.len()
    }

    /// Whether the matcher holds no routine.
    pub fn is_empty(&self) -> bool {
        self.routines.is_empty()
    }

    /// The routines a message from `channel` with `text` fires, sorted by id.
    /// A filter names a channel (`telegram:42`) or a kind of channel
    /// (`telegram` matches every Telegram chat, `ws` every WebSocket).
    pub fn matches(&self, channel: &str, text: &str) -> Vec<Uuid> {
        if self.routines.is_empty() {
            return Vec::new();
        }
        let mut hits = Vec::new();
        self.plain.matches_into(text, &mut hits);
        self.bounded.matches_into(text, &mut hits);
        if let Some(literal) = &self.literal {
            literal.matches_into(text, &mut hits);
        }
        // Global indices are in id order.
        hits.sort_unstable();
        let mut ids: Vec<Uuid> = hits
            .into_iter()
            .filter_map(|i| self.routines.get(i))
            .filter(|(_, filter)| {
                filter
                    .as_deref()
                    .is_none_or(|c| channel_matches(c, channel))
            })
            .map(|(id, _)| *id)
            .collect();
        // An id given twice to `build` is still one routine.
        ids.dedup();
        ids
    }
}

impl Default for EventMatcher {
    fn default() -> Self {
        Self::empty()
    }
}

/// Whether a routine's channel filter takes a message from `channel`:
/// the same channel, or the kind before its `:` (`telegram` for `telegram:42`).
fn channel_matches(filter: &str, channel: &str) -> bool {
    channel == filter
        || channel
            .strip_prefix(filter)
            .is_some_and(|rest| rest.starts_with(':'))
}

#[cfg(test)]
mod channel_tests {
    use super::channel_matches;

    #[test]
    fn a_filter_names_a_channel_or_its_kind() {
        assert!(channel_matches("telegram", "telegram"));
        assert!(channel_matches("telegram", "telegram:42"));
        assert!(channel_matches("telegram:42", "telegram:42"));
        assert!(!channel_matches("telegram:42", "telegram:43"));
        assert!(!channel_matches("tele", "telegram:42"));
        assert!(!channel_matches("telegram", "ws:abc"));
    }
}
