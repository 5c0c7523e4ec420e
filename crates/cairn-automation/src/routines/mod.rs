//! The routine engine's parts: the action seam, the checks that turn a spec
//! into a stored routine, the event matcher that decides which event
//! routines an inbound chat message fires, and the agent's routine tools.

pub mod action;
pub mod define;
pub mod event_matcher;
pub mod tools;
