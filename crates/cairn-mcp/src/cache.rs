//! The tool lists of servers, remembered in the store (settings key
//! `mcp.tools.<server>`) from their last connection, so the prompt can name
//! a lazy server's tools before it is started. A list is kept with a
//! fingerprint of how the server is reached (program and arguments, or URL;
//! hashed, since they may hold credentials): a changed entry is not trusted.

use std::hash::{Hash, Hasher};

use cairn_store::Store;
use serde::{Deserialize, Serialize};

use crate::config::{ServerSpec, Transport};
use crate::remote::RemoteTool;

#[derive(Serialize, Deserialize)]
struct Entry {
    fingerprint: String,
    tools: Vec<RemoteTool>,
}

/// Remembered tool lists, over the store.
#[derive(Clone)]
pub struct ToolCache {
    store: Store,
}

fn key(server: &str) -> String {
    format!("mcp.tools.{server}")
}

/// A digest of how `spec` is reached.
fn fingerprint(spec: &ServerSpec) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    match &spec.transport {
        Transport::Stdio { command, args, .. } => ("stdio", command, args).hash(&mut hasher),
        Transport::Http { url, .. } => ("http", url).hash(&mut hasher),
    }
    format!("{:016x}", hasher.finish())
}

impl ToolCache {
    /// A cache over `store`.
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The list remembered for `spec`, if it still describes the same server.
    pub async fn load(&self, spec: &ServerSpec) -> Option<Vec<RemoteTool>> {
        let value = match self.store.get_setting(&key(&spec.name)).await {
            Ok(value) => value?,
            Err(error) => {
                tracing::warn!(server = %spec.name, %error, "cannot read the remembered MCP tools");
                return None;
            }
        };
        let entry: Entry = serde_json::from_value(value).ok()?;
        (entry.fingerprint == fingerprint(spec)).then_some(entry.tools)
    }

    /// Remembers `tools` as `spec`'s list.
    pub async fn save(&self, spec: &ServerSpec, tools: &[RemoteTool]) {
        let entry = Entry {
            fingerprint: fingerprint(spec),
            tools: tools.to_vec(),
        };
        let saved = match serde_json::to_value(&entry) {
            Ok(value) => self.store.set_setting(&key(&spec.name), &value).await,
            Err(error) => {
                tracing::warn!(server = %spec.name, %error, "cannot encode the MCP tools");
                return;
            }
        };
        if let Err(error) = saved {
            tracing::warn!(server = %spec.name, %error, "cannot remember the MCP tools");
        }
    }
}
