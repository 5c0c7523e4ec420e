//! The routine service: the one place that decides and writes operations
//! on a person's routines, whichever front end asks (the CLI, the REST API,
//! the agent's tools). Front ends authenticate and parse, call a method
//! here with who is asking ([`Actor`]), and translate the answer or the
//! [`ServiceError`]; none of them re-implements a rule.
//!
//! It creates, replaces (and renames), deletes, enables and disables
//! routines, applies sets of routine files and keeps cairn's built-in ones
//! ([`write`]); it pauses, resumes, backfills and lists next fires (here).
//! Every write judges the spec with
//! [`prepare`](super::define::prepare), checks that the name is free,
//! writes, and wakes the engine. Reads (listing, runs) go to the store.
//!
//! Architecture invariant: every rule about who may do what to a routine
//! (cairn's own routines are off limits to the agent) is checked here.

use std::sync::Arc;

use cairn_core::clock::Clock;
use cairn_core::live::Live;
use cairn_core::routine::{
    CatchUp, MAIN_AGENT, Overlap, Pause, Routine, RoutineRun, RunStatus, Trigger,
};
use cairn_core::text::closest;
use cairn_store::{Admission, OverlapRule, Store, StoreError};
use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use uuid::Uuid;

use super::define::Problem;
use super::define::{schedule_at_slot, zone_of};
use super::engine::RoutineEngine;
use super::link::EngineLink;
use super::plan::plan;
use super::slots::{next_slots, slots_between};
use super::system::builtin_refusal;

mod write;

pub use write::{Applied, Enabled, Replaced};

/// Longest pause note kept, in characters.
pub const MAX_NOTE: usize = 500;
/// Most next fires one listing returns.
pub const MAX_NEXT: usize = 100;
/// The lateness from which a slot counts as missed (the engine's default).
const LATE_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Wakes a routine engine after a change, so it acts at once.
pub trait Wake: Send + Sync {
    /// Wake it (no engine in this process: nothing happens).
    fn wake(&self);
}

impl Wake for RoutineEngine {
    fn wake(&self) {
        self.poke();
    }
}

impl Wake for EngineLink {
    fn wake(&self) {
        if let Some(engine) = self.engine() {
            engine.poke();
        }
    }
}

/// Who asks for an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// The person, through a front end (`cli`, `api`).
    Person {
        /// Their user id.
        user: String,
        /// The front end.
        via: &'static str,
    },
    /// The agent, acting for the person: its calls pass the policy gate as
    /// writes, and cairn's own routines are off limits to it.
    Agent,
}

impl Actor {
    /// How the actor is recorded (`ada (cli)`, `the agent`).
    pub fn label(&self) -> String {
        match self {
            Actor::Person { user, via } => format!("{user} ({via})"),
            Actor::Agent => "the agent".to_string(),
        }
    }
}

/// Why an operation was not done.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// No routine has that name.
    #[error("no routine named \"{name}\"{}", .suggestion.as_ref().map(|s| format!("; did you mean \"{s}\"?")).unwrap_or_default())]
    NotFound {
        /// The name asked for.
        name: String,
        /// The closest existing name.
        suggestion: Option<String>,
    },
    /// The request itself is wrong (a bad range, a note too long).
    #[error("{0}")]
    Invalid(String),
    /// The routine's state does not allow it (disabled, paused).
    #[error("{0}")]
    Conflict(String),
    /// The actor may not do this to this routine.
    #[error("{0}")]
    Forbidden(String),
    /// A backfill larger than `routines.max_backfill`, not confirmed.
    #[error(
        "a backfill of routine \"{name}\" from {from} to {to} covers {count} slots, more than routines.max_backfill ({max}); confirm to run them all"
    )]
    TooMany {
        /// The routine.
        name: String,
        /// The range asked for.
        from: String,
        /// Its end.
        to: String,
        /// Slots in it (at least).
        count: usize,
        /// The bound.
        max: u32,
    },
    /// The spec has problems (each with its field path); nothing was written.
    #[error("routine \"{name}\": {}, nothing written: {}", count(.problems.len()), .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Problems {
        /// The routine's name, as the spec gives it.
        name: String,
        /// Every problem found.
        problems: Vec<Problem>,
    },
    /// Another of the person's routines has this name.
    #[error("a routine named \"{0}\" already exists")]
    Taken(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a pause did.
#[derive(Debug, Clone, PartialEq)]
pub struct Paused {
    /// The routine as it now is.
    pub routine: Routine,
    /// It was paused already (this call changed nothing).
    pub already: bool,
}

/// What a resume did.
#[derive(Debug, Clone, PartialEq)]
pub struct Resumed {
    /// The routine as it now is.
    pub routine: Routine,
    /// The pause it lifted (`None`: it was not paused).
    pub lifted: Option<Pause>,
    /// What becomes of the slots missed while paused, in a sentence.
    pub catch_up: Option<String>,
}

/// One of a routine's next fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextFire {
    /// The slot (its identity in the run history).
    pub slot: DateTime<Utc>,
    /// When it fires: the slot plus the routine's jitter.
    pub fires_at: DateTime<Utc>,
}

/// What a backfill recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Backfill {
    /// The routine.
    pub routine: Routine,
    /// The overlap policy it was recorded under.
    pub overlap: Overlap,
    /// Slots recorded to run, oldest first: they run one after another.
    pub queued: Vec<RoutineRun>,
    /// Slots that already had a run, with that run's status (not run again).
    pub already: Vec<(DateTime<Utc>, Option<RunStatus>)>,
    /// Slots recorded skipped by the overlap policy, with the reason.
    pub skipped: Vec<(DateTime<Utc>, String)>,
}

/// A backfill request.
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillRequest {
    /// From this instant (included).
    pub from: DateTime<Utc>,
    /// To this instant (included); not in the future.
    pub to: DateTime<Utc>,
    /// How the slots meet runs going (default `buffer_all`: they wait, in order).
    pub overlap: Option<Overlap>,
    /// Confirmed beyond `routines.max_backfill`.
    pub confirmed: bool,
}

/// The agents routines may run as: `main`, then the ids given (`main`
/// among them is not repeated).
pub fn agent_ids(agents: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut ids = vec![MAIN_AGENT.to_string()];
    ids.extend(agents.into_iter().filter(|a| a != MAIN_AGENT));
    ids
}

/// Operations on one person's routines.
#[derive(Clone)]
pub struct RoutineService {
    store: Store,
    clock: Arc<dyn Clock>,
    user_id: String,
    user_zone: Tz,
    wake: Option<Arc<dyn Wake>>,
    max_backfill: u32,
    /// The agents a routine may run as (`[[agents]]`), `main` first; a
    /// reload of `[[agents]]` replaces them.
    agents: Live<Vec<String>>,
}

impl std::fmt::Debug for RoutineService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutineService")
            .field("user_id", &self.user_id)
            .finish_non_exhaustive()
    }
}

impl RoutineService {
    /// The service for `user_id`'s routines (read in `user_zone` when they
    /// name no zone of their own), on `store`.
    pub fn new(
        store: Store,
        clock: Arc<dyn Clock>,
        user_id: impl Into<String>,
        user_zone: Tz,
    ) -> Self {
        Self {
            store,
            clock,
            user_id: user_id.into(),
            user_zone,
            wake: None,
            max_backfill: 1000,
            agents: Live::new(Arc::new(vec![MAIN_AGENT.to_string()])),
        }
    }

    /// The agents routines may run as (the ids of `[[agents]]`); `main`
    /// alone unless given. A spec naming another is refused at `agent`.
    #[must_use]
    pub fn with_agents(mut self, agents: impl IntoIterator<Item = String>) -> Self {
        self.agents = Live::new(Arc::new(agent_ids(agents)));
        self
    }

    /// Reads the agents from `agents` ([`agent_ids`]), which a reload of
    /// `[[agents]]` replaces.
    #[must_use]
    pub fn with_agent_set(mut self, agents: Live<Vec<String>>) -> Self {
        self.agents = agents;
        self
    }

    /// The slot [`Self::agents`] reads, to share with another service
    /// ([`Self::with_agent_set`]) or to replace on a reload.
    pub fn agent_set(&self) -> Live<Vec<String>> {
        self.agents.clone()
    }

    /// The agents routines may run as now, `main` first.
    pub fn agents(&self) -> Arc<Vec<String>> {
        self.agents.get()
    }

    /// Wakes this engine after each change.
    pub fn with_wake(mut self, wake: Arc<dyn Wake>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// Refuses backfills larger than this without confirmation (`routines.max_backfill`).
    pub fn with_max_backfill(mut self, max: u32) -> Self {
        self.max_backfill = max.max(1);
        self
    }

    /// The user whose routines these are.
    pub fn user_id(&self) -> &str {
        &self.user_id
    }

    /// The store, for reads (listings, runs); writes go through the service.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The zone routines without their own are read in.
    pub fn user_zone(&self) -> Tz {
        self.user_zone
    }

    /// Now, by the service's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    fn wake(&self) {
        if let Some(wake) = &self.wake {
            wake.wake();
        }
    }

    /// The routine named `name`.
    pub async fn find(&self, name: &str) -> Result<Routine, ServiceError> {
        if let Some(routine) = self.store.find_routine(&self.user_id, name).await? {
            return Ok(routine);
        }
        let all = self.store.list_routines(Some(&self.user_id)).await?;
        Err(ServiceError::NotFound {
            name: name.to_string(),
            suggestion: closest(name, all.iter().map(|r| r.spec.name.as_str())).map(str::to_string),
        })
    }

    /// Refuses what `actor` may not do to `routine`.
    fn gate(&self, actor: &Actor, routine: &Routine) -> Result<(), ServiceError> {
        match builtin_refusal(routine) {
            Some(why) if *actor == Actor::Agent => Err(ServiceError::Forbidden(why)),
            _ => Ok(()),
        }
    }

    async fn reread(&self, routine: &Routine) -> Result<Routine, ServiceError> {
        Ok(self
            .store
            .get_routine(routine.id)
            .await?
            .unwrap_or_else(|| routine.clone()))
    }

    /// Pauses `name`: it keeps its schedule and history and fires nothing
    /// until resumed. `note` says why (trimmed; at most [`MAX_NOTE`] characters).
    pub async fn pause(
        &self,
        name: &str,
        note: Option<&str>,
        actor: &Actor,
    ) -> Result<Paused, ServiceError> {
        let routine = self.find(name).await?;
        self.gate(actor, &routine)?;
        let note = note.map(str::trim).filter(|n| !n.is_empty());
        if let Some(note) = note
            && note.chars().count() > MAX_NOTE
        {
            return Err(ServiceError::Invalid(format!(
                "the note is {} characters; at most {MAX_NOTE} are kept",
                note.chars().count()
            )));
        }
        if routine.runtime.paused.is_some() {
            return Ok(Paused {
                routine,
                already: true,
            });
        }
        let pause = Pause {
            at: self.clock.now(),
            by: actor.label(),
            note: note.map(str::to_string),
        };
        let took = self.store.pause_routine(routine.id, &pause).await?;
        self.wake();
        Ok(Paused {
            routine: self.reread(&routine).await?,
            already: !took,
        })
    }

    /// Resumes `name`. The slots it missed while paused are owed: the next
    /// timer round catches them up by the routine's `catch_up` policy, which
    /// the answer describes.
    pub async fn resume(&self, name: &str, actor: &Actor) -> Result<Resumed, ServiceError> {
        let routine = self.find(name).await?;
        self.gate(actor, &routine)?;
        let now = self.clock.now();
        let lifted = match routine.runtime.paused {
            Some(_) => self.store.resume_routine(routine.id, now).await?,
            None => None,
        };
        let catch_up = lifted
            .as_ref()
            .and_then(|_| self.catch_up_preview(&routine, now));
        self.wake();
        Ok(Resumed {
            routine: self.reread(&routine).await?,
            lifted,
            catch_up,
        })
    }

    /// What the engine will do about the slots `routine` missed, as of `now`.
    fn catch_up_preview(&self, routine: &Routine, now: DateTime<Utc>) -> Option<String> {
        let slot = routine.runtime.next_fire_at?;
        if !routine.spec.enabled {
            return None;
        }
        let g = &routine.spec.guardrails;
        let shifted = now - routine.jitter();
        if slot > shifted {
            return Some(format!(
                "no slot was missed while paused; the next fires at {}",
                rfc3339(routine.fires_at(slot))
            ));
        }
        let schedule = match &routine.spec.trigger {
            Trigger::Cron { schedule } => {
                let zone = zone_of(&routine.spec, self.user_zone);
                schedule_at_slot(schedule, zone, slot).ok()
            }
            _ => None,
        };
        let p = plan(
            schedule.as_ref(),
            slot,
            shifted,
            g.catch_up,
            g.catch_up_limit,
            LATE_GRACE,
        );
        let missed = p.left_out + p.run.len() + usize::from(p.skip.is_some());
        let what = match g.catch_up {
            CatchUp::Once => "catch_up: once runs the latest of them now".to_string(),
            CatchUp::Skip => "catch_up: skip runs none of them".to_string(),
            CatchUp::All => format!(
                "catch_up: all runs {} of them now, oldest first",
                p.run.len()
            ),
        };
        Some(format!(
            "{missed} slot(s) {} while paused; {what}",
            if missed == 1 {
                "was missed"
            } else {
                "were missed"
            }
        ))
    }

    /// The next `count` fires of `name` (at most [`MAX_NEXT`]), jitter applied.
    pub async fn next_fires(
        &self,
        name: &str,
        count: usize,
    ) -> Result<Vec<NextFire>, ServiceError> {
        let routine = self.find(name).await?;
        Ok(self.next_of(&routine, count))
    }

    /// The next `count` fires of `routine` (at most [`MAX_NEXT`]), jitter applied.
    pub fn next_of(&self, routine: &Routine, count: usize) -> Vec<NextFire> {
        next_slots(
            routine,
            self.user_zone,
            self.clock.now(),
            count.min(MAX_NEXT),
        )
        .into_iter()
        .map(|slot| NextFire {
            slot,
            fires_at: routine.fires_at(slot),
        })
        .collect()
    }

    /// Records the slots of `name` from `request.from` to `request.to` to
    /// run in order, with trigger `backfill`, under the exactly-once slot
    /// rule: a slot that already has a run is left alone and reported.
    /// The runs wait their turn; an engine starts them (the caller's, when
    /// it has one, or the daemon's).
    pub async fn backfill(
        &self,
        name: &str,
        request: &BackfillRequest,
        actor: &Actor,
    ) -> Result<Backfill, ServiceError> {
        let routine = self.find(name).await?;
        self.gate(actor, &routine)?;
        let now = self.clock.now();
        let (from, to) = (request.from, request.to);
        backfill_allowed(name, &routine, from, to, now)?;
        let slots = self.backfill_slots(name, &routine, request)?;
        let overlap = request.overlap.unwrap_or(Overlap::BufferAll);
        let existing = self.store.slot_runs(routine.id, from, to).await?;
        let mut already: Vec<(DateTime<Utc>, Option<RunStatus>)> = Vec::new();
        let mut runs = Vec::new();
        for slot in &slots {
            // The latest attempt says what became of the slot.
            match existing
                .iter()
                .rev()
                .find(|r| r.scheduled_for == Some(*slot))
            {
                Some(run) => already.push((*slot, Some(run.status))),
                None => runs.push(self.backfill_run(&routine, *slot, now, actor)),
            }
        }
        let mut backfill = Backfill {
            routine: routine.clone(),
            overlap,
            queued: Vec::new(),
            already,
            skipped: Vec::new(),
        };
        if runs.is_empty() {
            return Ok(backfill);
        }
        let admission = Admission {
            max_concurrent: Some(routine.spec.guardrails.max_concurrent),
            overlap: Some(OverlapRule {
                policy: overlap,
                start_first: false,
                buffer_limit: u32::MAX,
            }),
            ..Admission::default()
        };
        let asked: Vec<DateTime<Utc>> = runs.iter().filter_map(|r| r.scheduled_for).collect();
        let round = self
            .store
            .admit_rounds(&[(admission, runs)])
            .await?
            .pop()
            .ok_or_else(|| StoreError::Conflict("an admission answered nothing".into()))?;
        for slot in asked {
            match round.runs.iter().find(|r| r.scheduled_for == Some(slot)) {
                Some(run) if run.status == RunStatus::Skipped => backfill
                    .skipped
                    .push((slot, run.skip_reason.clone().unwrap_or_default())),
                Some(run) => backfill.queued.push(run.clone()),
                // Another process recorded it meanwhile.
                None => backfill.already.push((slot, None)),
            }
        }
        backfill.already.sort_by_key(|(slot, _)| *slot);
        self.wake();
        Ok(backfill)
    }

    /// The slots a backfill covers; more than `routines.max_backfill` only
    /// when confirmed.
    fn backfill_slots(
        &self,
        name: &str,
        routine: &Routine,
        request: &BackfillRequest,
    ) -> Result<Vec<DateTime<Utc>>, ServiceError> {
        let (from, to) = (request.from, request.to);
        let max = usize::try_from(self.max_backfill).unwrap_or(usize::MAX);
        let slots = slots_between(routine, self.user_zone, from, to, max.saturating_add(1))
            .map_err(ServiceError::Invalid)?;
        if slots.len() > max && !request.confirmed {
            let all = slots_between(routine, self.user_zone, from, to, usize::MAX)
                .map_err(ServiceError::Invalid)?;
            return Err(ServiceError::TooMany {
                name: name.to_string(),
                from: rfc3339(from),
                to: rfc3339(to),
                count: all.len(),
                max: self.max_backfill,
            });
        }
        Ok(if request.confirmed {
            slots_between(routine, self.user_zone, from, to, usize::MAX)
                .map_err(ServiceError::Invalid)?
        } else {
            slots
        })
    }

    fn backfill_run(
        &self,
        routine: &Routine,
        slot: DateTime<Utc>,
        now: DateTime<Utc>,
        actor: &Actor,
    ) -> RoutineRun {
        RoutineRun {
            id: Uuid::now_v7(),
            routine_id: routine.id,
            trigger_type: "backfill".to_string(),
            trigger_detail: Some(format!(
                "backfill of slot {} asked by {}",
                rfc3339(slot),
                actor.label()
            )),
            scheduled_for: Some(slot),
            attempt: cairn_core::routine::FIRST_ATTEMPT,
            started_at: now,
            completed_at: None,
            status: RunStatus::Waiting,
            result_summary: None,
            tokens_used: None,
            job_id: None,
            notification_id: None,
            skip_reason: None,
            dedup_key: None,
            owner: None,
            lease_until: None,
        }
    }
}

/// Why a backfill of `routine` from `from` to `to` cannot run now, if it
/// cannot: an empty or future range, or a disabled or paused routine.
fn backfill_allowed(
    name: &str,
    routine: &Routine,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), ServiceError> {
    if from > to {
        return Err(ServiceError::Invalid(format!(
            "the range is empty: from {} is after to {}",
            rfc3339(from),
            rfc3339(to)
        )));
    }
    if to > now {
        return Err(ServiceError::Invalid(format!(
            "to {} is in the future; a backfill runs past slots only (now is {})",
            rfc3339(to),
            rfc3339(now)
        )));
    }
    if !routine.spec.enabled {
        return Err(ServiceError::Conflict(format!(
            "routine \"{name}\" is disabled; enable it first"
        )));
    }
    if let Some(pause) = &routine.runtime.paused {
        return Err(ServiceError::Conflict(format!(
            "routine \"{name}\" is {}; resume it first",
            cairn_store::paused_reason(pause)
        )));
    }
    Ok(())
}

/// "1 problem", "3 problems".
fn count(n: usize) -> String {
    if n == 1 {
        "1 problem".to_string()
    } else {
        format!("{n} problems")
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
