//! Writing routines: create, replace (a new name renames), delete, enable
//! or disable, apply a set of specs at once, and keep cairn's built-in
//! routines as configured. Each write judges the spec with
//! [`prepare`](crate::routines::define::prepare), checks the name is free,
//! writes, and wakes the engine; front ends only parse and translate.

use cairn_core::routine::{Routine, RoutineAction, RoutineSpec, Trigger};
use cairn_store::{RoutineWrite, StoreError};
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::{Actor, RoutineService, ServiceError};
use crate::routines::define::{Problem, prepare, schedule_of, unknown_agent};
use crate::routines::system::{Ensured, SystemRoutine};

/// What a replace did.
#[derive(Debug, Clone, PartialEq)]
pub struct Replaced {
    /// The routine as it now is.
    pub routine: Routine,
    /// The spec differed from the stored one.
    pub changed: bool,
    /// Its name before, when the replace renamed it.
    pub renamed_from: Option<String>,
}

/// What an enable or disable did.
#[derive(Debug, Clone, PartialEq)]
pub struct Enabled {
    /// The routine as it now is.
    pub routine: Routine,
    /// It was already so (this call changed nothing).
    pub already: bool,
}

/// What [`RoutineService::apply`] did to one spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// No routine had its name: created.
    Created,
    /// Its spec replaced the stored one.
    Updated,
    /// The stored spec was the same: nothing written.
    Unchanged,
}

impl Applied {
    /// The word a listing shows.
    pub fn as_str(self) -> &'static str {
        match self {
            Applied::Created => "created",
            Applied::Updated => "updated",
            Applied::Unchanged => "unchanged",
        }
    }
}

impl RoutineService {
    /// The person's routine `key` names: its id, else its name.
    pub async fn resolve(&self, key: &str) -> Result<Routine, ServiceError> {
        if let Ok(id) = Uuid::parse_str(key)
            && let Some(routine) = self.store.get_routine(id).await?
            && routine.user_id == self.user_id
        {
            return Ok(routine);
        }
        self.find(key).await
    }

    /// `spec` checked for a write by `actor`, replacing `stored` (whose
    /// webhook secret a `"***"` keeps), with its next slot.
    fn judge(
        &self,
        mut spec: RoutineSpec,
        stored: Option<&RoutineSpec>,
        actor: &Actor,
    ) -> Result<(RoutineSpec, Option<DateTime<Utc>>), ServiceError> {
        if *actor == Actor::Agent && matches!(spec.action, RoutineAction::System { .. }) {
            return Err(ServiceError::Forbidden(
                "action type `system` is for cairn's built-in routines, which only their settings in config.toml control"
                    .into(),
            ));
        }
        let name = spec.name.clone();
        let problems = |problems: Vec<Problem>| ServiceError::Problems {
            name: name.clone(),
            problems,
        };
        spec.restore_secret(stored).map_err(|e| {
            problems(vec![Problem {
                path: e.path,
                message: e.message,
            }])
        })?;
        // An agent not configured is one more problem, reported with the rest.
        let next = match (
            prepare(&spec, self.user_zone, self.clock.now()),
            unknown_agent(&spec, &self.agents()),
        ) {
            (Ok(next), None) => next,
            (Ok(_), Some(agent)) => return Err(problems(vec![agent])),
            (Err(mut found), agent) => {
                found.extend(agent);
                return Err(problems(found));
            }
        };
        Ok((spec, next))
    }

    /// A new routine of this person's, first due at `next`.
    fn new_routine(
        &self,
        spec: RoutineSpec,
        next: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Routine {
        let mut routine = Routine::new(spec, self.user_id.clone(), now);
        routine.runtime.next_fire_at = next;
        routine
    }

    async fn refuse_taken(&self, name: &str) -> Result<(), ServiceError> {
        match self.store.find_routine(&self.user_id, name).await? {
            Some(_) => Err(ServiceError::Taken(name.to_string())),
            None => Ok(()),
        }
    }

    /// Creates a routine from `spec`; its name must be free.
    pub async fn create(&self, spec: RoutineSpec, actor: &Actor) -> Result<Routine, ServiceError> {
        self.create_with_state(spec, Value::Null, actor).await
    }

    /// Creates a routine from `spec` with `state` as its starting runtime
    /// state (`null`: none), for front ends that keep counts there (watchers).
    pub async fn create_with_state(
        &self,
        spec: RoutineSpec,
        state: Value,
        actor: &Actor,
    ) -> Result<Routine, ServiceError> {
        let (spec, next) = self.judge(spec, None, actor)?;
        self.refuse_taken(&spec.name).await?;
        let mut routine = self.new_routine(spec, next, self.clock.now());
        if !state.is_null() {
            routine.runtime.state = state;
        }
        self.store
            .create_routine(&routine)
            .await
            .map_err(|e| match e {
                // Another writer took the name meanwhile.
                StoreError::Conflict(_) => ServiceError::Taken(routine.spec.name.clone()),
                e => ServiceError::Store(e),
            })?;
        self.wake();
        Ok(routine)
    }

    /// Replaces `routine`'s spec with `spec` (its history and state are
    /// kept; its next slot is computed again). A different name in `spec`
    /// renames it, when that name is free.
    pub async fn replace(
        &self,
        mut routine: Routine,
        spec: RoutineSpec,
        actor: &Actor,
    ) -> Result<Replaced, ServiceError> {
        self.gate(actor, &routine)?;
        let (spec, next) = self.judge(spec, Some(&routine.spec), actor)?;
        let renamed_from = (spec.name != routine.spec.name).then(|| routine.spec.name.clone());
        if renamed_from.is_some() {
            self.refuse_taken(&spec.name).await?;
        }
        let changed = routine.spec != spec;
        routine.spec = spec;
        routine.runtime.next_fire_at = next;
        routine.updated_at = self.clock.now();
        self.store.update_routine(&routine).await?;
        self.wake();
        Ok(Replaced {
            routine,
            changed,
            renamed_from,
        })
    }

    /// Deletes `routine` with its run history.
    pub async fn delete(&self, routine: &Routine, actor: &Actor) -> Result<(), ServiceError> {
        self.gate(actor, routine)?;
        if !self.store.delete_routine(routine.id).await? {
            return Err(ServiceError::NotFound {
                name: routine.spec.name.clone(),
                suggestion: None,
            });
        }
        self.wake();
        Ok(())
    }

    /// Enables or disables `name`. Enabling a recurring timed routine starts
    /// from its next slot after now: slots passed while disabled are not owed.
    pub async fn set_enabled(
        &self,
        name: &str,
        enabled: bool,
        actor: &Actor,
    ) -> Result<Enabled, ServiceError> {
        let routine = self.find(name).await?;
        self.gate(actor, &routine)?;
        if routine.spec.enabled == enabled {
            return Ok(Enabled {
                routine,
                already: true,
            });
        }
        let now = self.clock.now();
        if enabled
            && matches!(routine.spec.trigger, Trigger::Cron { .. })
            && let Some(Ok(schedule)) = schedule_of(&routine.spec, self.user_zone, now)
        {
            // The slot first, so the engine never sees it enabled on a stale one.
            self.store
                .set_next_fire_at(routine.id, schedule.next_after(now), now)
                .await?;
        }
        self.store
            .set_routine_enabled(routine.id, enabled, now)
            .await?;
        self.wake();
        Ok(Enabled {
            routine: self.reread(&routine).await?,
            already: false,
        })
    }

    /// Creates or replaces each of `specs` by name, all in one transaction:
    /// every spec is written or none. A spec equal to the stored one is
    /// left alone.
    pub async fn apply(
        &self,
        specs: Vec<RoutineSpec>,
        actor: &Actor,
    ) -> Result<Vec<(Applied, Routine)>, ServiceError> {
        let now = self.clock.now();
        let mut done = Vec::with_capacity(specs.len());
        let mut writes = Vec::new();
        for spec in specs {
            let existing = self.store.find_routine(&self.user_id, &spec.name).await?;
            if let Some(existing) = &existing {
                self.gate(actor, existing)?;
            }
            let (spec, next) = self.judge(spec, existing.as_ref().map(|r| &r.spec), actor)?;
            match existing {
                None => {
                    let routine = self.new_routine(spec, next, now);
                    writes.push(RoutineWrite::Create(routine.clone()));
                    done.push((Applied::Created, routine));
                }
                Some(existing) if existing.spec == spec => {
                    done.push((Applied::Unchanged, existing));
                }
                Some(mut existing) => {
                    existing.spec = spec;
                    existing.runtime.next_fire_at = next;
                    existing.updated_at = now;
                    writes.push(RoutineWrite::Update(existing.clone()));
                    done.push((Applied::Updated, existing));
                }
            }
        }
        if !writes.is_empty() {
            self.store.save_routines(&writes).await?;
            self.wake();
        }
        Ok(done)
    }

    /// Makes each of `wanted` (cairn's built-in routines) exist as
    /// specified, writing only what differs: an unchanged schedule keeps
    /// its slot. Returns what was done, in order.
    pub async fn ensure_builtin(
        &self,
        wanted: &[SystemRoutine],
    ) -> Result<Vec<(String, Ensured)>, StoreError> {
        let now = self.clock.now();
        let mut done = Vec::with_capacity(wanted.len());
        for system in wanted {
            let spec = system.spec();
            let next = prepare(&spec, self.user_zone, now).map_err(|problems| {
                StoreError::Conflict(format!(
                    "built-in routine \"{}\" is invalid: {}",
                    system.name,
                    problems
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            })?;
            let outcome = match self.store.find_routine(&self.user_id, &system.name).await? {
                Some(existing) if existing.spec == spec => Ensured::Unchanged,
                Some(mut existing) => {
                    let rescheduled = existing.spec.trigger != spec.trigger
                        || (spec.enabled && !existing.spec.enabled);
                    existing.spec = spec;
                    if rescheduled || existing.runtime.next_fire_at.is_none() {
                        existing.runtime.next_fire_at = next;
                    }
                    existing.updated_at = now;
                    self.store.update_routine(&existing).await?;
                    Ensured::Updated
                }
                None => {
                    let routine = self.new_routine(spec, next, now);
                    match self.store.create_routine(&routine).await {
                        Ok(()) => Ensured::Created,
                        Err(StoreError::Conflict(_)) => Ensured::Raced,
                        Err(e) => return Err(e),
                    }
                }
            };
            done.push((system.name.clone(), outcome));
        }
        if done.iter().any(|(_, e)| *e != Ensured::Unchanged) {
            self.wake();
        }
        Ok(done)
    }
}
