//! Notifications: output channels, the router that records them, and the
//! dispatcher that delivers them.

pub mod channel;
pub mod channels;
pub mod config;
pub mod dispatcher;
pub mod router;

pub use channel::{Channel, DeliveryError, Receipt};
pub use config::{
    ChannelConfigError, ChannelSpec, INBOX, ParsedChannels, UnavailableChannel, parse_channels,
};
pub use dispatcher::{AttemptReport, Dispatcher, owner_id, retry_delay};
pub use router::{Activity, ChannelSet, GivenUp, Notifier, NotifySettings};
