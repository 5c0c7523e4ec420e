//! `overlap`: what a routine's due slots do while another of its runs is
//! still going, decided for a whole round of slots at once (one slot, the
//! slots `catch_up: all` runs, or a backfill). Pure: the store calls
//! [`decide`] inside the transaction that counted the runs going, so the
//! verdict holds across processes.
//!
//! A round's own slots never overlap each other: the first starts (or
//! waits, when nobody is there to start it) and the others wait behind it,
//! run one at a time, oldest first, when no run of the routine is going.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// What a slot that comes due while a run of its routine is going does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It does not run (recorded skipped, saying why).
    Skip,
    /// It waits for the run going to end; at most one slot waits, later ones are skipped.
    BufferOne,
    /// It waits, as does every later one (at most `catch_up_limit` waiting).
    BufferAll,
    /// The run going is cancelled (recorded `cancelled`, its job stopped) and the slot starts.
    CancelOther,
    /// It starts beside the run going, up to `max_concurrent` runs at once.
    AllowAll,
}

impl Overlap {
    /// Every policy, for listings and parsing.
    pub const ALL: [Overlap; 5] = [
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::BufferAll,
        Overlap::CancelOther,
        Overlap::AllowAll,
    ];

    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::BufferAll => "buffer_all",
            Overlap::CancelOther => "cancel_other",
            Overlap::AllowAll => "allow_all",
        }
    }
}

impl std::str::FromStr for Overlap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Overlap::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown overlap policy \"{s}\"; expected skip, buffer_one, buffer_all, cancel_other or allow_all"
                )
            })
    }
}

/// The routine's runs going when a round comes due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Going {
    /// Runs `running`.
    pub running: u64,
    /// Slots `waiting` their turn.
    pub waiting: u64,
    /// One of the running runs, to name in reasons.
    pub a_running: Option<Uuid>,
    /// The latest waiting slot, to name in reasons.
    pub last_waiting: Option<DateTime<Utc>>,
}

impl Going {
    fn busy(&self) -> bool {
        self.running > 0 || self.waiting > 0
    }

    /// "run X is still running" or "slot T is still waiting its turn".
    fn what(&self) -> String {
        match (self.a_running, self.last_waiting) {
            (Some(id), _) => format!("run {id} of this routine is still running"),
            (None, Some(slot)) => format!("slot {} is still waiting its turn", rfc3339(slot)),
            (None, None) => "a run of this routine is still going".to_string(),
        }
    }
}

/// What becomes of one slot of a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    /// It starts now.
    Start,
    /// It waits its turn (`waiting`).
    Wait,
    /// It does not run, for this reason (`overlap: …`).
    Skip(String),
}

/// The verdict on a round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundPlan {
    /// Cancel the runs going and drop the slots waiting (`cancel_other`).
    pub cancel_going: bool,
    /// One fate per slot of the round, in order.
    pub fates: Vec<Fate>,
}

/// A round's verdict.
///
/// `slots` are the round's slots, oldest first; `start_first` says whether
/// its first slot may start at once (an engine is there to run it) or only
/// wait (a backfill recorded by a front end); `buffer_limit` bounds the
/// slots waiting under `buffer_all`.
pub fn decide(
    policy: Overlap,
    going: &Going,
    slots: &[DateTime<Utc>],
    start_first: bool,
    max_concurrent: u32,
    buffer_limit: u32,
) -> RoundPlan {
    let first = if start_first { Fate::Start } else { Fate::Wait };
    let queued = |first: Fate| -> Vec<Fate> {
        (0..slots.len())
            .map(|i| if i == 0 { first.clone() } else { Fate::Wait })
            .collect()
    };
    let skip_all = |reason: String| -> Vec<Fate> {
        slots.iter().map(|_| Fate::Skip(reason.clone())).collect()
    };
    let keep = |fates| RoundPlan {
        cancel_going: false,
        fates,
    };
    if !going.busy() {
        return keep(queued(first));
    }
    match policy {
        Overlap::Skip => keep(skip_all(format!("overlap: skip; {}", going.what()))),
        Overlap::CancelOther => RoundPlan {
            cancel_going: true,
            fates: queued(first),
        },
        Overlap::AllowAll if going.running < u64::from(max_concurrent) => keep(queued(first)),
        Overlap::AllowAll => keep(skip_all(format!(
            "overlap: allow_all; max_concurrent: {} run(s) of this routine already running (limit {max_concurrent})",
            going.running
        ))),
        Overlap::BufferOne => {
            let held = going.last_waiting.or(slots.first().copied());
            let reason = |slot: Option<DateTime<Utc>>| {
                format!(
                    "overlap: buffer_one; slot {} already waits for {}",
                    slot.map(rfc3339).unwrap_or_default(),
                    if going.running > 0 {
                        "the run going"
                    } else {
                        "its turn"
                    }
                )
            };
            let fates = slots
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    if i == 0 && going.waiting == 0 {
                        Fate::Wait
                    } else {
                        Fate::Skip(reason(held))
                    }
                })
                .collect();
            keep(fates)
        }
        Overlap::BufferAll => {
            let mut waiting = going.waiting;
            let limit = u64::from(buffer_limit.max(1));
            let fates = slots
                .iter()
                .map(|_| {
                    if waiting < limit {
                        waiting += 1;
                        Fate::Wait
                    } else {
                        Fate::Skip(format!(
                            "overlap: buffer_all; {waiting} slot(s) already wait (limit {limit})"
                        ))
                    }
                })
                .collect();
            keep(fates)
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {

    use super::*;
    use chrono::TimeZone;

    fn t(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 9, h, 0, 0).unwrap()
    }

    fn running() -> Going {
        Going {
            running: 1,
            a_running: Some(Uuid::nil()),
            ..Going::default()
        }
    }

    #[test]
    fn with_nothing_going_the_first_starts_and_the_rest_wait_whatever_the_policy() {
        for policy in Overlap::ALL {
            let p = decide(policy, &Going::default(), &[t(1), t(2)], true, 1, 10);
            assert_eq!(p.fates, [Fate::Start, Fate::Wait], "{policy:?}");
            assert!(!p.cancel_going);
            let p = decide(policy, &Going::default(), &[t(1)], false, 1, 10);
            assert_eq!(p.fates, [Fate::Wait], "{policy:?}");
        }
    }

    #[test]
    fn skip_names_the_run_going() {
        let p = decide(Overlap::Skip, &running(), &[t(1)], true, 1, 10);
        let [Fate::Skip(reason)] = p.fates.as_slice() else {
            panic!("{p:?}")
        };
        assert_eq!(
            reason,
            &format!(
                "overlap: skip; run {} of this routine is still running",
                Uuid::nil()
            )
        );
    }

    #[test]
    fn buffer_one_keeps_one_waiting_slot() {
        let p = decide(Overlap::BufferOne, &running(), &[t(1), t(2)], true, 1, 10);
        assert_eq!(p.fates[0], Fate::Wait);
        assert!(
            matches!(&p.fates[1], Fate::Skip(r) if r.starts_with("overlap: buffer_one; slot 2026-03-09T01:00:00Z already waits"))
        );
        let going = Going {
            waiting: 1,
            last_waiting: Some(t(0)),
            ..running()
        };
        let p = decide(Overlap::BufferOne, &going, &[t(1)], true, 1, 10);
        assert!(
            matches!(&p.fates[0], Fate::Skip(r) if r.contains("slot 2026-03-09T00:00:00Z already waits"))
        );
    }

    #[test]
    fn buffer_all_waits_up_to_its_limit() {
        let going = Going {
            waiting: 1,
            ..running()
        };
        let p = decide(Overlap::BufferAll, &going, &[t(1), t(2), t(3)], true, 1, 3);
        assert_eq!(p.fates[..2], [Fate::Wait, Fate::Wait]);
        assert_eq!(
            p.fates[2],
            Fate::Skip("overlap: buffer_all; 3 slot(s) already wait (limit 3)".into())
        );
    }

    #[test]
    fn cancel_other_cancels_and_starts() {
        let p = decide(Overlap::CancelOther, &running(), &[t(1)], true, 1, 10);
        assert!(p.cancel_going);
        assert_eq!(p.fates, [Fate::Start]);
    }

    #[test]
    fn allow_all_starts_beside_up_to_max_concurrent() {
        let p = decide(Overlap::AllowAll, &running(), &[t(1)], true, 2, 10);
        assert_eq!(p.fates, [Fate::Start]);
        let p = decide(Overlap::AllowAll, &running(), &[t(1)], true, 1, 10);
        assert!(
            matches!(&p.fates[0], Fate::Skip(r) if r.starts_with("overlap: allow_all; max_concurrent: 1 run(s)"))
        );
    }

    #[test]
    fn names_parse_back() {
        for o in Overlap::ALL {
            assert_eq!(o.as_str().parse::<Overlap>(), Ok(o));
        }
        assert!(
            "buffer"
                .parse::<Overlap>()
                .unwrap_err()
                .contains("buffer_one")
        );
    }
}
