//! cairn-core: the domain types and pure logic of cairn.
//!
//! Everything here is deterministic and free of I/O: routines and their
//! validation, schedules (cron, human phrases, one-shots, time zones, DST),
//! configuration resolution, threshold expressions over JSON results,
//! and the chat message types shared by the LLM
//! and agent layers. Callers pass in text, environment maps and instants;
//! nothing here reads files or the network, and only
//! [`clock::SystemClock`] reads the machine's clock.

pub mod active_hours;
pub mod chat;
pub mod clock;
pub mod config;
pub mod duration;
pub mod fold;
pub mod image;
pub mod ip_range;
pub mod job;
pub mod live;
pub mod notification;
pub mod routine;
pub mod routing;
pub mod schedule;
pub mod skill;
pub mod submission;
pub mod text;
pub mod threshold;
pub mod watchers;
