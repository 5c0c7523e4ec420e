//! The routine engine's parts: for now the event matcher that decides which
//! event routines an inbound chat message fires.

pub mod event_matcher;
