//! Reading a crowded slot's routines ahead of it: when many routines share
//! the next slot, the timer wakes [`LEAD`] before it and reads them, so at
//! the slot it only plans, claims and starts them. The read is most of a
//! round's cost, and the last of a burst's runs waits for every round before
//! it.
//!
//! A routine can change between that read and its slot. Each claim of a
//! routine read ahead therefore also compares what a change would move (its
//! `updated_at`, failure streak and state, see [`cairn_store::AsRead`]); a
//! routine changed since keeps its slot, and the timer's next round, right
//! after, reads it again as it is. A change signal (a poke) drops the
//! routines read ahead.

use super::*;

/// How long before a crowded slot its routines are read.
pub(super) const LEAD: Duration = Duration::from_secs(1);
/// How many routines a slot needs before it is read ahead: fewer are read
/// at the slot in a few milliseconds, and a slot read ahead costs a wake.
pub(super) const CROWDED: u64 = 100;
/// Most routines read ahead for one slot (the rest are read at the slot).
const MOST: u32 = 5_000;

/// The routines of one slot, read ahead of it.
pub(super) struct ReadAhead {
    /// The slot (jitter applied): they are due from then.
    pub(super) at: DateTime<Utc>,
    routines: Vec<Routine>,
}

impl RoutineEngine {
    /// When to read the slot `at` ahead (with no routines read ahead yet):
    /// `LEAD` before it, if it is further off than that and crowded.
    pub(super) async fn read_ahead_at(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let lead = chrono::Duration::from_std(LEAD).unwrap_or_default();
        let wake = at - lead;
        if wake <= self.inner.clock.now() {
            return None;
        }
        match self.inner.store.count_due(at).await {
            Ok(n) if n >= CROWDED => Some(wake),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "routine engine: cannot count a slot's routines");
                None
            }
        }
    }

    /// Reads the routines due at `at`, ahead of it.
    pub(super) async fn read_ahead(&self, at: DateTime<Utc>) -> Option<ReadAhead> {
        match self.inner.store.due_routines(at, MOST).await {
            Ok(routines) => Some(ReadAhead { at, routines }),
            Err(e) => {
                tracing::warn!(error = %e, "routine engine: cannot read a slot's routines ahead");
                None
            }
        }
    }

    /// Fires routines read ahead, now that their slot has come: reaps first
    /// when a lease can have lapsed, then claims and starts them a batch at
    /// a time, each batch at its own time. What a claim did not take (a
    /// routine changed since the read) is for the next round.
    pub(super) async fn fire_read_ahead(&self, ahead: ReadAhead) -> Result<(), StoreError> {
        let clock = &self.inner.clock;
        let now = clock.now();
        if self.lease_may_have_lapsed(now) {
            self.reap(now).await?;
        }
        let batch = (self.inner.settings.batch as usize).max(1);
        // The runs of the first batches end while the later ones are being
        // claimed: their ends wait (then go a few hundred a transaction),
        // so that the one writer takes the slot's claims back to back.
        let _ends_wait = self.inner.finishes.hold().await;
        let mut report = TickReport::default();
        for routines in ahead.routines.chunks(batch) {
            // Each batch's runs start at once, beside the next batch's claim.
            self.fire_due(routines, clock.now(), true, &mut report)
                .await?;
        }
        tracing::debug!(
            started = report.started,
            skipped = report.skipped,
            waiting = report.waiting,
            changed_or_taken = report.taken,
            "routine engine: fired a slot read ahead"
        );
        Ok(())
    }
}
