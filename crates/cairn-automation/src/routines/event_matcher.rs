//! Which event routines an inbound chat message fires.
//!
//! Every pattern of every enabled event routine is compiled into one
//! [`regex::RegexSet`], so a message is scanned once however many routines
//! there are; each routine's optional channel filter is checked on the
//! patterns that matched. Matching is **case-sensitive as written**: a
//! routine that wants otherwise writes `(?i)` in its pattern. A pattern
//! matches anywhere in the text unless it anchors itself (`^…$`).
//!
//! Speed: a message is matched by the set's lazy DFA in a few µs, except
//! that a Unicode word boundary (`\b`) in any pattern makes that DFA give
//! up on non-ASCII text, and the fallback takes milliseconds with thousands
//! of patterns (see the bench; `(?-u:\b)` avoids it).
//!
//! The matcher is immutable: when routines change, the engine builds a new
//! one and swaps an `Arc`, so matching never waits on a rebuild.

use std::fmt;

use cairn_core::routine::{Routine, Trigger};
use regex::{RegexBuilder, RegexSet, RegexSetBuilder};
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
    check(None, routine, pattern)
}

fn check(routine_id: Option<Uuid>, routine: &str, pattern: &str) -> Result<(), PatternError> {
    let problem = if pattern.is_empty() {
        PatternProblem::Empty
    } else {
        match RegexBuilder::new(pattern)
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()
        {
            Ok(_) => return Ok(()),
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

/// All enabled event routines' patterns in one compiled set.
#[derive(Debug, Clone)]
pub struct EventMatcher {
    set: RegexSet,
    /// Per set index, in the set's order (sorted by routine id).
    routines: Vec<(Uuid, Option<String>)>,
}

impl EventMatcher {
    /// A matcher that matches nothing.
    pub fn empty() -> Self {
        Self {
            set: RegexSet::empty(),
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
        // Each pattern is checked on its own first so a failure names its
        // routine and one pathological pattern cannot use the others' budget.
        let errors: Vec<PatternError> = patterns
            .iter()
            .filter_map(|p| check(Some(p.id), &p.name, &p.pattern).err())
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        if patterns.is_empty() {
            // A set with a size limit of 0 bytes would refuse even nothing.
            return Ok(Self::empty());
        }
        let set = RegexSetBuilder::new(patterns.iter().map(|p| p.pattern.as_str()))
            .size_limit(PATTERN_SIZE_LIMIT.saturating_mul(patterns.len()))
            .dfa_size_limit(SET_DFA_SIZE_LIMIT)
            .build()
            .map_err(|err| {
                // Unreachable in practice (each pattern compiled alone within
                // its share), but reported rather than assumed.
                vec![PatternError {
                    routine_id: None,
                    routine: format!("{} event routines together", patterns.len()),
                    pattern: "(all event patterns)".to_string(),
                    problem: problem_of(err),
                }]
            })?;
        let routines = patterns.into_iter().map(|p| (p.id, p.channel)).collect();
        Ok(EventMatcher { set, routines })
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
    pub fn matches(&self, channel: &str, text: &str) -> Vec<Uuid> {
        if self.routines.is_empty() {
            return Vec::new();
        }
        // Set indices come out ascending, and the set is in id order.
        let mut ids: Vec<Uuid> = self
            .set
            .matches(text)
            .into_iter()
            .filter_map(|i| self.routines.get(i))
            .filter(|(_, filter)| filter.as_deref().is_none_or(|c| c == channel))
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
