//! The routine engine's parts: the action seam and the event matcher that
//! decides which event routines an inbound chat message fires.

pub mod action;
pub mod actions;
pub mod event_matcher;
