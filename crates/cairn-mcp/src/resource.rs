//! `mcp_resource_read`: the servers' resources and prompts for the agent,
//! through one tool: with `server` alone it lists what the server offers,
//! with `uri` it reads a resource, with `prompt` (and `arguments`) it fills
//! a prompt.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use cairn_agent::runner::Authorized;
use cairn_agent::tools::args::object_or_empty;
use cairn_agent::tools::{
    CallOutcome, RiskLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec, schema,
};
use serde_json::{Map, Value, json};

use crate::content::bounded;
use crate::remote::{RemoteError, RemotePrompt, RemoteResource};
use crate::server::Server;

/// The tool's name.
pub const RESOURCE_TOOL: &str = "mcp_resource_read";

/// What a server offers besides tools.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Catalog {
    /// Its resources.
    pub resources: Vec<RemoteResource>,
    /// Its prompts.
    pub prompts: Vec<RemotePrompt>,
}

/// Lists a server's resources and prompts (starting it when lazy).
pub async fn catalog(server: &Arc<Server>) -> Result<Catalog, ToolError> {
    let conn = server.connection().await?;
    let failed =
        |e: RemoteError| ToolError::Failed(format!("MCP server \"{}\": {e}", server.name()));
    Ok(Catalog {
        resources: conn.list_resources().await.map_err(failed)?,
        prompts: conn.list_prompts().await.map_err(failed)?,
    })
}

/// `mcp_resource_read` over the configured servers.
pub struct ResourceTool {
    servers: Vec<Arc<Server>>,
}

impl ResourceTool {
    /// The tool over these servers.
    pub fn new(servers: Vec<Arc<Server>>) -> Self {
        Self { servers }
    }

    fn server(&self, name: &str) -> Result<&Arc<Server>, ToolError> {
        let key = crate::names::tool_part(name);
        self.servers
            .iter()
            .find(|s| s.name() == key)
            .ok_or_else(|| {
                let known: Vec<&str> = self.servers.iter().map(|s| s.name()).collect();
                ToolError::InvalidArguments(format!(
                    "no MCP server named \"{name}\"; configured: {}",
                    known.join(", ")
                ))
            })
    }
}

fn text_arg<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ToolError::InvalidArguments(format!(
            "`{key}` must be a string"
        ))),
    }
}

static RESOURCE_SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    ToolSpec::new(
        RESOURCE_TOOL,
        RiskLevel::ReadOnly,
        "Read an MCP server's resource (`uri`) or prompt (`prompt`, `arguments`); \
         with `server` alone, list the resources and prompts it offers.",
    )
    .params(schema::object(
        json!({
            "server": {"type": "string", "description": "the MCP server's name"},
            "uri": {"type": "string", "description": "a resource's URI"},
            "prompt": {"type": "string", "description": "a prompt's name"},
            "arguments": {"type": "object", "description": "the prompt's arguments"}
        }),
        &["server"],
    ))
    // What a server offers changes while it runs.
    .not_reusable()
});

#[async_trait]
impl Tool for ResourceTool {
    fn spec(&self) -> &ToolSpec {
        &RESOURCE_SPEC
    }

    async fn execute(&self, args: Value, _: &ToolContext, _: &Authorized) -> CallOutcome {
        let name = text_arg(&args, "server")?.ok_or_else(|| {
            ToolError::InvalidArguments("missing required string `server`".into())
        })?;
        let server = self.server(name)?;
        let failed =
            |e: RemoteError| ToolError::Failed(format!("MCP server \"{}\": {e}", server.name()));
        let limit = server.spec().max_output_chars;
        let uri = text_arg(&args, "uri")?;
        let prompt = text_arg(&args, "prompt")?;
        let text = match (uri, prompt) {
            (Some(_), Some(_)) => {
                return Err(ToolError::InvalidArguments(
                    "give `uri` or `prompt`, not both".into(),
                ));
            }
            (Some(uri), None) => {
                let conn = server.connection().await?;
                conn.read_resource(uri).await.map_err(failed)?
            }
            (None, Some(prompt)) => {
                let arguments = match object_or_empty(&args, "arguments")? {
                    Value::Object(map) => map,
                    _ => Map::new(),
                };
                let conn = server.connection().await?;
                conn.get_prompt(prompt, arguments).await.map_err(failed)?
            }
            (None, None) => serde_json::to_string(&catalog(server).await?)
                .map_err(|e| ToolError::Failed(e.to_string()))?,
        };
        Ok(ToolOutput::ok(bounded(text, limit)))
    }
}
