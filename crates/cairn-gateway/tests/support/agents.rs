//! A second agent beside the test gateway's main one, as `[[agents]]`
//! makes one: its own chat service (sessions, workspace) over the same
//! provider, asking another model, so the fake LLM's log tells who ran.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cairn_gateway::Gateway;

/// The other agent's id.
pub const FAMILY: &str = "family";
/// The model it asks.
pub const FAMILY_MODEL: &str = "family-model";

/// `gateway` serving [`FAMILY`] too, with its workspace at `workspace`.
pub fn with_family(gateway: Gateway, workspace: &Path) -> Gateway {
    let main = Arc::clone(gateway.chat().unwrap());
    let agent = main.agent().with_model(Some(FAMILY_MODEL.into()));
    let family = cairn_test_support::agent::chat_service(
        gateway.store(),
        Arc::clone(gateway.clock()),
        agent,
        workspace,
        main.approval_timeout(),
    );
    gateway.with_agents(BTreeMap::from([(FAMILY.to_string(), Arc::new(family))]))
}
