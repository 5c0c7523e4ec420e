//! The output channels, one module per service. Each module has the
//! channel's settings (`…Spec`, what a `[channels.NAME]` table holds) and
//! its delivery.

pub mod discord;
pub mod email;
pub mod ntfy;
pub mod slack;
pub mod telegram;
pub mod webhook;
