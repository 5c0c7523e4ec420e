//! Whose a leak is: the agent, the session, and the routine run or job it
//! happened in. The finder knows the session; the run is known to whoever
//! runs it ([`in_run`], a scope the checks inside read), and the agent to
//! the guard its parts hold ([`super::LeakGuard::for_agent`]).

use std::future::Future;

/// Whose turn or run a leak belongs to, as far as the finder knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeakOrigin {
    /// The agent.
    pub agent: Option<String>,
    /// The session.
    pub session_id: Option<String>,
    /// The routine run or job.
    pub run_id: Option<String>,
}

impl LeakOrigin {
    /// A leak in `session_id`.
    pub fn session(session_id: impl Into<String>) -> Self {
        Self {
            session_id: Some(session_id.into()),
            ..Self::default()
        }
    }
}

tokio::task_local! {
    /// The run (and its agent) the checks of this scope happen in.
    static RUN: LeakOrigin;
}

/// Runs `work` as the routine run or job `run_id` (of `agent`, when
/// known): a leak found inside is recorded as that run's.
pub async fn in_run<F: Future>(run_id: String, agent: Option<String>, work: F) -> F::Output {
    let scope = LeakOrigin {
        agent,
        session_id: None,
        run_id: Some(run_id),
    };
    RUN.scope(scope, work).await
}

/// `origin` with what it does not say taken from the run in scope, then
/// the guard's `agent`.
pub(super) fn completed(origin: &LeakOrigin, agent: Option<&str>) -> LeakOrigin {
    let run = RUN.try_with(Clone::clone).unwrap_or_default();
    LeakOrigin {
        agent: origin
            .agent
            .clone()
            .or(run.agent)
            .or_else(|| agent.map(str::to_string)),
        session_id: origin.session_id.clone(),
        run_id: origin.run_id.clone().or(run.run_id),
    }
}
