//! Claiming a crowded slot ahead of it: when many routines share the next
//! slot, the timer wakes a little before it ([`lead`]), reads them, claims
//! their slots and records their runs as of the slot (`started_at` is the
//! slot); a moment before the slot it begins them, at the slot it starts
//! them. Claiming is most of a burst's cost, and the last of its runs would
//! otherwise wait for every batch claimed before it.
//!
//! What the claim cannot know yet stays for the slot itself:
//! - a routine changed between the read and the claim is not taken (the
//!   claim compares what a change would move, see [`cairn_store::AsRead`]);
//! - a routine with a run going or waiting is not taken: whether its slot
//!   starts, waits or is skipped (its `overlap`) depends on what is going at
//!   the slot.
//!
//! The timer's round at the slot takes those as usual. The runs claimed
//! belong to a claim (`run_claims`) until the engine begins it, a moment
//! before the slot (one small write, `Store::begin_claim`, which says how
//! many were given back meanwhile). Until then a pause, a disable or an
//! edit of a routine gives its run back in the same transaction (deletes
//! it and, but for an edit, puts the slot back), and a delete takes it with
//! the routine: the slot runs as the routine is then, or not at all. The
//! claim's other decisions (the global `max_concurrent`, cooldown, backoff)
//! are made as of the slot with what is known at the claim.

use super::execute::Start;
use super::*;

/// The longest lead: what a slot of [`MOST`] routines gets.
const MOST_LEAD: Duration = Duration::from_secs(2);
/// How many routines a slot needs before it is claimed ahead: fewer are
/// claimed at the slot in a few milliseconds, and a claim ahead costs a wake.
pub(super) const CROWDED: u64 = 100;
/// Most routines claimed ahead for one slot (the rest are claimed at it).
/// A run claimed ahead is a record of about a kilobyte until the slot; with
/// 10,000 rather than 5,000, 10,000 due were done p99 438-476 ms after the
/// slot against 549-613, their RSS 20 MB higher at the slot and the same
/// 30 s after it (docs/performance.md).
const MOST: u32 = 10_000;

/// How long before a slot of `n` routines its claim begins: enough for the
/// claim to end before the slot on a slow day (2,000 routines took 60-275 ms
/// on 2 shared cores), so that the edits it misses are few.
fn lead(n: u64) -> chrono::Duration {
    let micros = 100_000 + n.saturating_mul(150);
    let most = chrono::Duration::from_std(MOST_LEAD).unwrap_or_default();
    chrono::Duration::microseconds(i64::try_from(micros).unwrap_or(i64::MAX)).min(most)
}

/// How long before its slot a claim is begun: the begin's write is out of
/// the way when the slot comes, and its runs start on it. A change in that
/// moment no longer gives a run back; it acts as if made just after the slot.
const BEGIN_AHEAD: chrono::Duration = chrono::Duration::milliseconds(5);

/// The runs of one slot, claimed ahead of it.
pub(super) struct ClaimedAhead {
    /// The claim's id in the store.
    pub(super) id: Uuid,
    /// The slot (jitter applied): they start then.
    pub(super) at: DateTime<Utc>,
    pub(super) starts: Vec<Start>,
}

impl ClaimedAhead {
    /// When the timer begins the claim ([`BEGIN_AHEAD`] before its slot).
    pub(super) fn begin_at(&self) -> DateTime<Utc> {
        self.at - BEGIN_AHEAD
    }
}

impl RoutineEngine {
    /// When to claim the slot `at` ahead (with nothing claimed yet): its
    /// lead before it (or now, when that has passed), if it is crowded and
    /// further off than the shortest lead.
    pub(super) async fn claim_ahead_at(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let now = self.inner.clock.now();
        if at - lead(CROWDED) <= now {
            return None;
        }
        match self.inner.store.count_due(at).await {
            Ok(n) if n >= CROWDED => Some((at - lead(n)).max(now)),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "routine engine: cannot count a slot's routines");
                None
            }
        }
    }

    /// Reads the routines due at `at` and claims their slot as of `at`, a
    /// batch at a time; reaps first when a lease can have lapsed.
    pub(super) async fn claim_ahead(&self, at: DateTime<Utc>) -> Result<ClaimedAhead, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        if self.lease_may_have_lapsed(now) {
            self.reap(now).await?;
        }
        let due = inner.store.due_routines(at, MOST).await?;
        let batch = (inner.settings.batch as usize).max(1);
        // Runs ending meanwhile wait (then go a few hundred a transaction),
        // so that the one writer takes the slot's claims back to back.
        let _ends_wait = inner.finishes.hold().await;
        let mut report = TickReport::default();
        let mut claimed = ClaimedAhead {
            id: Uuid::now_v7(),
            at,
            starts: Vec::with_capacity(due.len()),
        };
        for routines in due.chunks(batch) {
            self.fire_due(routines, at, Some(&mut claimed), &mut report)
                .await?;
        }
        // Their ends' statements, ready before the slot (see the store's
        // `prepare_run_ends`); without them the ends are only slower.
        if let Err(e) = inner.store.prepare_run_ends().await {
            tracing::debug!(error = %e, "routine engine: cannot prepare the slot's run ends");
        }
        tracing::debug!(
            claimed = claimed.starts.len(),
            skipped = report.skipped,
            waiting = report.waiting,
            left_for_the_slot = report.taken,
            "routine engine: claimed a slot ahead"
        );
        Ok(claimed)
    }

    /// Begins the runs claimed ahead, their slot at hand (see
    /// [`ClaimedAhead::begin_at`]), and starts them on it: those given back
    /// meanwhile are left out.
    pub(super) async fn start_claimed(&self, claimed: ClaimedAhead) {
        let store = &self.inner.store;
        let mut starts = claimed.starts;
        let begun = store.begin_claim(claimed.id, self.inner.clock.now()).await;
        match begun {
            Ok(Some(0)) => {}
            Ok(_) => {
                let ids: Vec<Uuid> = starts.iter().map(|s| s.run.id).collect();
                match store.still_running(&ids).await {
                    Ok(running) => starts.retain(|s| running.contains(&s.run.id)),
                    Err(e) => {
                        // Begun, so no longer given back: what is left
                        // cannot be told apart now; their leases settle them.
                        tracing::warn!(error = %e, runs = ids.len(), "routine engine: cannot tell which runs claimed ahead are left");
                        return;
                    }
                }
            }
            // Unbegun, a pause can still give them back; if none comes, their
            // leases lapse and the reaper settles them.
            Err(e) => {
                tracing::warn!(error = %e, runs = starts.len(), "routine engine: cannot begin the runs claimed ahead");
                return;
            }
        }
        self.inner.clock.sleep_until_exact(claimed.at).await;
        let now = self.inner.clock.now();
        let lateness = (now - claimed.at).num_microseconds().unwrap_or(0).max(0);
        // Looked up once for the slot's thousands of runs, not per run.
        let late = metrics::histogram!("cairn_routine_fire_lateness_seconds");
        for start in starts {
            late.record(lateness as f64 / 1e6);
            self.start(start);
        }
    }
}
