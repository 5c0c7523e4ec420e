//! Notifications: output channels, the router that records them, and the
//! dispatcher that delivers them.

pub mod channel;
pub mod channels;
pub mod config;

pub use channel::{Channel, DeliveryError, Receipt};
pub use config::{ChannelConfigError, ChannelSpec, INBOX, parse_channels};
