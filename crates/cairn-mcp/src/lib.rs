//! cairn and the Model Context Protocol.
//!
//! As a client ([`McpClients`]): the servers of `[[mcp.servers]]` (stdio
//! processes or streamable HTTP endpoints), supervised ([`server`]), their
//! tools given to the agent's registry as one [`ToolSource`] under the names
//! `mcp__<server>__<tool>` ([`source`]), each call passing the runner's
//! policy gate like any other tool, and their resources and prompts read
//! through `mcp_resource_read` ([`resource`]).
//!
//! As a server ([`serve`]): `cairn mcp serve` offers some of cairn's own
//! tools to other agents and editors over stdio, through the same runner
//! and gate.
//!
//! `rmcp` is used only in [`rmcp_client`] and [`serve`], behind cairn's own
//! [`remote::Connection`] trait.
//!
//! Architecture invariant: an MCP tool runs only through
//! [`cairn_agent::ToolRunner`] (it is a [`cairn_agent::tools::Tool`]), so a
//! server never bypasses the policy gate, and a server's annotations never
//! lower the risk configured for it.

pub mod cache;
pub mod config;
pub mod content;
pub mod names;
pub mod process;
pub mod remote;
pub mod resource;
pub mod rmcp_client;
pub mod serve;
pub mod server;
pub mod source;
pub mod tool;

use std::sync::Arc;
use std::time::Duration;

use cairn_agent::tools::{Tool, ToolSource};
use cairn_store::Store;

pub use config::{ConfigProblem, ServerSpec, StartMode, Transport, parse_servers, policy_rules};
pub use server::{Places, Server, State, Status, Supervision};

/// Every configured MCP server of one process.
pub struct McpClients {
    servers: Vec<Arc<Server>>,
    /// What new servers are made with ([`McpClients::reconfigured`]).
    places: Places,
    cache: Option<cache::ToolCache>,
    supervision: Supervision,
}

/// The servers a new configuration keeps, adds and leaves out
/// ([`McpClients::reconfigured`]).
pub struct Reconfigured {
    /// The servers now configured: unchanged ones as they run, new and
    /// changed ones not yet started ([`McpClients::start`]).
    pub clients: McpClients,
    /// Servers removed or changed: stop them once the new set is in use.
    pub retired: Vec<Arc<Server>>,
}

impl McpClients {
    /// The servers of `specs`, not started; with a store, each one's tool
    /// list from its last connection is loaded (and later ones saved).
    pub async fn new(
        specs: Vec<ServerSpec>,
        places: Places,
        store: Option<Store>,
        supervision: Supervision,
    ) -> Self {
        let mut clients = Self {
            servers: Vec::with_capacity(specs.len()),
            places,
            cache: store.map(cache::ToolCache::new),
            supervision,
        };
        for spec in specs {
            let server = clients.server_for(spec).await;
            clients.servers.push(server);
        }
        clients
    }

    /// A new server for `spec`, with its remembered tool list.
    async fn server_for(&self, spec: ServerSpec) -> Arc<Server> {
        let remembered = match &self.cache {
            Some(cache) if spec.enabled && spec.unavailable.is_none() => cache.load(&spec).await,
            _ => None,
        };
        Server::new(
            spec,
            self.places.clone(),
            self.supervision,
            self.cache.clone(),
            remembered,
        )
    }

    /// The servers of `specs` (a configuration reload): a server whose
    /// entry is unchanged is kept as it runs, the others are new; nothing
    /// is started or stopped here.
    pub async fn reconfigured(&self, specs: Vec<ServerSpec>) -> Reconfigured {
        let mut clients = Self {
            servers: Vec::with_capacity(specs.len()),
            places: self.places.clone(),
            cache: self.cache.clone(),
            supervision: self.supervision,
        };
        for spec in specs {
            let kept = self.servers.iter().find(|s| *s.spec() == spec);
            let server = match kept {
                Some(server) => Arc::clone(server),
                None => clients.server_for(spec).await,
            };
            clients.servers.push(server);
        }
        let retired = self
            .servers
            .iter()
            .filter(|old| !clients.servers.iter().any(|s| Arc::ptr_eq(s, old)))
            .cloned()
            .collect();
        Reconfigured { clients, retired }
    }

    /// Starts the servers that start at start-up, and the lazy ones whose
    /// tools are not known yet (to learn them); returns at once.
    pub fn start(&self) {
        for server in &self.servers {
            let wanted = match server.spec().start {
                StartMode::Startup => true,
                StartMode::Lazy => server.tools_from() == server::ToolsFrom::None,
            };
            if wanted {
                server.ensure_started();
            }
        }
    }

    /// Waits until no server is starting, at most `limit` (a one-shot chat
    /// waits so its first request names the tools).
    pub async fn settle(&self, limit: Duration) {
        let waits = self.servers.iter().map(|s| s.settle(limit));
        futures::future::join_all(waits).await;
    }

    /// Starts every enabled server now, lazy ones included, and waits until
    /// each is connected or failed, at most the longest `connect_timeout_secs`
    /// (`cairn mcp list`, `doctor`).
    pub async fn connect_all(&self) {
        for server in &self.servers {
            server.ensure_started();
        }
        let limit = self
            .servers
            .iter()
            .map(|s| s.spec().connect_timeout)
            .max()
            .unwrap_or_default();
        self.settle(limit).await;
    }

    /// True when no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The servers, in configuration order.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The server named `name` (as configured or normalized).
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        let key = names::tool_part(name);
        self.servers.iter().find(|s| s.name() == key)
    }

    /// Every server's status.
    pub fn statuses(&self) -> Vec<Status> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// The servers' tools, for the registry.
    pub fn source(&self) -> Arc<dyn ToolSource> {
        Arc::new(source::McpTools::new(self.servers.clone()))
    }

    /// The registered tools this crate adds: `mcp_resource_read`, when a
    /// server is configured.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        if self.servers.is_empty() {
            return Vec::new();
        }
        vec![Arc::new(resource::ResourceTool::new(self.servers.clone()))]
    }

    /// The servers' `allow` and `deny` lists as policy rules `(allow, deny)`.
    pub fn policy_rules(&self) -> (Vec<String>, Vec<String>) {
        let specs: Vec<ServerSpec> = self.servers.iter().map(|s| s.spec().clone()).collect();
        policy_rules(&specs)
    }

    /// Closes every connection and ends the processes.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.stop())).await;
    }
}
