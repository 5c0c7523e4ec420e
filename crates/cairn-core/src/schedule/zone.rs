//! Time zones and DST: offsets, transitions, and how local wall-clock times map to instants.
//!
//! Instants are Unix seconds; local wall-clock times are "local seconds" (the
//! wall clock read as if it were UTC). A zone's offset is piecewise constant;
//! chrono-tz does not expose its transition table, so transitions are found by
//! bisection on the offset, which only ever happens on days that have one.
//!
//! Two mappings from wall clock to instants, as Debian cron does it:
//! - **fixed** (a fixed local time): a time skipped by a spring-forward gap
//!   maps to the first instant after the gap; a time repeated at fall-back
//!   maps to its first occurrence only.
//! - **elapsed** (a wildcard minute or hour): every instant whose wall clock
//!   matches fires, in real-time order; skipped times never fire, repeated
//!   times fire in both passes (each instant once).

use chrono::{DateTime, Offset, TimeZone};
use chrono_tz::Tz;

/// 0001-01-01T00:00:00Z: earlier instants are clamped to it.
pub(crate) const MIN_INSTANT: i64 = -62_135_596_800;
/// 9999-12-31T23:59:59Z: nothing is evaluated past it.
pub(crate) const MAX_INSTANT: i64 = 253_402_300_799;

/// Wider than any UTC offset that has ever existed (±15:56 in 19th-century LMT).
const MARGIN: i64 = 16 * 3600;

/// Offset from UTC in seconds (east positive) in effect at an instant.
pub(crate) fn offset_at(tz: Tz, t: i64) -> i64 {
    let t = t.clamp(MIN_INSTANT, MAX_INSTANT);
    match DateTime::from_timestamp(t, 0) {
        Some(dt) => i64::from(
            tz.offset_from_utc_datetime(&dt.naive_utc())
                .fix()
                .local_minus_utc(),
        ),
        None => 0,
    }
}

/// How a piece of the local day maps to instants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Map {
    /// Instant = local - offset.
    Linear(i64),
    /// Every local time in the piece was skipped; it maps to this instant (the gap's end).
    Gap(i64),
}

/// A half-open range of local seconds `[lo, hi)` with one mapping, in real-time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    /// First local second.
    pub(crate) lo: i64,
    /// One past the last local second.
    pub(crate) hi: i64,
    /// The mapping to instants.
    pub(crate) map: Map,
}

/// At most this many offset changes are looked for in one day's window.
const MAX_SEGMENTS: usize = 4;

/// The pieces of one local day, in real-time order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DayPieces {
    items: [Piece; 2 * MAX_SEGMENTS],
    len: usize,
    /// Whether the zone changes offset near this day.
    pub(crate) has_transition: bool,
}

impl DayPieces {
    fn push(&mut self, lo: i64, hi: i64, map: Map) {
        if lo < hi && self.len < self.items.len() {
            self.items[self.len] = Piece { lo, hi, map };
            self.len += 1;
        }
    }

    /// The pieces, in real-time order.
    pub(crate) fn as_slice(&self) -> &[Piece] {
        &self.items[..self.len]
    }
}

/// The first instant in `(lo, hi]` whose offset differs from `off`; `offset_at(hi) != off`.
fn bisect_change(tz: Tz, mut lo: i64, mut hi: i64, off: i64) -> i64 {
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if offset_at(tz, mid) == off {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Splits the local day starting at local second `s0` into pieces.
///
/// `fixed` selects the fixed-local-time mapping (gaps collapse to their end,
/// repeated times keep their first pass); otherwise every pass is kept.
pub(crate) fn day_pieces(tz: Tz, s0: i64, fixed: bool) -> DayPieces {
    let s1 = s0 + 86_400;
    // Every instant whose local time falls in [s0, s1) lies in this window.
    let (w0, w1) = (s0 - MARGIN, s1 + MARGIN);
    let first = offset_at(tz, w0);
    let last = offset_at(tz, w1);
    let mut out = DayPieces {
        items: [Piece {
            lo: 0,
            hi: 0,
            map: Map::Linear(0),
        }; 2 * MAX_SEGMENTS],
        len: 0,
        has_transition: first != last,
    };
    if first == last {
        out.push(s0, s1, Map::Linear(first));
        return out;
    }
    // Segments of constant offset: (start instant, offset).
    let mut segments = [(w0, first); MAX_SEGMENTS];
    let mut count = 1;
    let mut off = first;
    while off != last && count < MAX_SEGMENTS {
        let t = bisect_change(tz, segments[count - 1].0, w1, off);
        off = offset_at(tz, t);
        segments[count] = (t, off);
        count += 1;
    }
    // Highest local time reached so far (fixed mapping only keeps new ground).
    let mut reached = w0 + first;
    for i in 0..count {
        let (start, off) = segments[i];
        let end = if i + 1 < count { segments[i + 1].0 } else { w1 };
        let (a, b) = (start + off, end + off);
        if fixed {
            if a > reached {
                out.push(reached.max(s0), a.min(s1), Map::Gap(start));
            }
            out.push(a.max(reached).max(s0), b.min(s1), Map::Linear(off));
            reached = reached.max(b);
        } else {
            out.push(a.max(s0), b.min(s1), Map::Linear(off));
        }
    }
    out
}

/// The instant of a local wall-clock time under the fixed mapping: the first
/// occurrence when repeated, the end of the gap when skipped.
pub(crate) fn resolve_local(tz: Tz, local: i64) -> i64 {
    let s0 = local.div_euclid(86_400) * 86_400;
    let pieces = day_pieces(tz, s0, true);
    for piece in pieces.as_slice() {
        if (piece.lo..piece.hi).contains(&local) {
            return match piece.map {
                Map::Linear(off) => local - off,
                Map::Gap(t) => t,
            };
        }
    }
    // Unreachable for well-formed zones (the pieces cover the day); fall back
    // to the offset at the naive instant rather than panic.
    local - offset_at(tz, local)
}

/// Parses an IANA zone name (`Europe/Paris`), naming it in the error when unknown.
pub fn parse_zone(name: &str) -> Result<Tz, super::ScheduleError> {
    name.trim()
        .parse::<Tz>()
        .map_err(|_| super::ScheduleError::UnknownZone {
            zone: name.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::NaiveDate;

    fn local(y: i32, m: u32, d: u32, h: u32, mi: u32) -> i64 {
        NaiveDate::from_ymd_opt(y, m, d)
            .unwrap()
            .and_hms_opt(h, mi, 0)
            .unwrap()
            .and_utc()
            .timestamp()
    }

    fn utc(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text).unwrap().timestamp()
    }

    #[test]
    fn resolves_gaps_to_their_end_and_repeats_to_the_first_pass() {
        let ny = chrono_tz::America::New_York;
        assert_eq!(
            resolve_local(ny, local(2026, 3, 8, 2, 30)),
            utc("2026-03-08T07:00:00Z")
        );
        assert_eq!(
            resolve_local(ny, local(2026, 3, 8, 1, 59)),
            utc("2026-03-08T06:59:00Z")
        );
        assert_eq!(
            resolve_local(ny, local(2026, 3, 8, 3, 0)),
            utc("2026-03-08T07:00:00Z")
        );
        assert_eq!(
            resolve_local(ny, local(2026, 11, 1, 1, 30)),
            utc("2026-11-01T05:30:00Z")
        );
        assert_eq!(
            resolve_local(ny, local(2026, 11, 1, 2, 0)),
            utc("2026-11-01T07:00:00Z")
        );
        let lh = chrono_tz::Australia::Lord_Howe;
        assert_eq!(
            resolve_local(lh, local(2026, 10, 4, 2, 10)),
            utc("2026-10-03T15:30:00Z")
        );
    }

    #[test]
    fn elapsed_mapping_keeps_both_passes() {
        let ny = chrono_tz::America::New_York;
        let pieces = day_pieces(ny, local(2026, 11, 1, 0, 0), false);
        let p = pieces.as_slice();
        assert_eq!(p.len(), 2);
        assert_eq!(
            (p[0].lo, p[0].hi),
            (local(2026, 11, 1, 0, 0), local(2026, 11, 1, 2, 0))
        );
        assert_eq!(
            (p[1].lo, p[1].hi),
            (local(2026, 11, 1, 1, 0), local(2026, 11, 2, 0, 0))
        );
        let quiet = day_pieces(ny, local(2026, 6, 1, 0, 0), false);
        assert!(!quiet.has_transition);
        assert_eq!(quiet.as_slice().len(), 1);
    }

    #[test]
    fn zone_names_are_checked() {
        assert_eq!(
            parse_zone("Europe/Paris").unwrap(),
            chrono_tz::Europe::Paris
        );
        let err = parse_zone("Mars/Olympus").unwrap_err().to_string();
        assert!(err.contains("unknown time zone \"Mars/Olympus\""), "{err}");
    }
}
