//! The routine engine: [`engine`] fires routines on time, events, webhooks
//! and by hand, exactly once across processes, under their guardrails;
//! [`action`] is the seam to what a routine does and [`actions`] the real
//! executor (LLM, tools, jobs, reminders), [`as_agent`] what it does as an
//! agent other than `main`; [`notice`] decides what a
//! finished run tells the person; [`define`] turns a spec into what
//! the store keeps; [`plan`] decides catch-up; [`event_matcher`] picks the
//! event routines a chat message fires; [`events`] are cairn's own events;
//! [`webhook`] verifies signatures; [`tools`] are the agent's routine tools;
//! [`system`] runs cairn's own upkeep as routines, [`heartbeat`] among them.

pub mod action;
pub mod actions;
pub mod as_agent;
pub mod define;
pub mod engine;
pub mod event_matcher;
pub mod events;
pub mod heartbeat;
pub mod link;
pub mod notice;
pub mod ops_tools;
pub mod plan;
pub mod service;
pub mod slots;
pub mod system;
pub mod tools;
pub mod unattended;
pub mod upkeep;
pub mod upkeep_watch;
pub mod watch;
pub mod webhook;
