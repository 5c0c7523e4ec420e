//! cairn-automation: what cairn does on its own.
//!
//! For now that is telling the person things: [`notify`] keeps every
//! notification as a record before it is a delivery, delivers pending ones
//! through the configured output channels (webhook, Slack, Discord,
//! Telegram, ntfy, email, log, the inbox) with retries, and puts whatever
//! cannot be delivered in the inbox with the reason. [`routines`] has the
//! first piece of the routine engine, the event matcher; the engine itself,
//! watchers and the heartbeat come next and notify through [`notify`].
//!
//! [`inbound`] has the front ends that receive messages (a Telegram bot),
//! one adapter shape for all of them.
//!
//! [`primitives`] are the agent's execution primitives (`run_parallel`,
//! background tasks, `send_notification`).
//!
//! Architecture invariant: "delivered" is recorded only when the receiver
//! confirmed it (a 2xx, an SMTP 250); nothing that should reach the person is
//! dropped (guide invariant 9).

pub mod inbound;
pub mod notify;
pub mod primitives;
pub mod routines;
mod tool_io;
