//! The servers' tools as one [`ToolSource`] of the agent's registry, and
//! the prompt's lines naming them, kept within a fixed budget however many
//! tools the servers have: names brace-grouped per server while they fit,
//! else a count per server, else one line; `tool_schema` with
//! `mcp__SERVER__*` lists a server's tools by name.

use std::sync::Arc;

use cairn_agent::tools::{Tool, ToolSource};

use crate::names;
use crate::server::{Server, State, ToolsFrom};
use crate::tool::McpTool;

/// Most bytes of prompt the MCP lines take together (the first request
/// stays within its 6 KB; GUIDE).
pub const LISTING_BUDGET: usize = 700;

/// Every configured server's tools.
pub struct McpTools {
    servers: Vec<Arc<Server>>,
}

impl McpTools {
    /// A source over these servers.
    pub fn new(servers: Vec<Arc<Server>>) -> Self {
        Self { servers }
    }

    fn lines(&self, hidden: &dyn Fn(&str) -> bool, detail: Detail) -> Vec<String> {
        let mut lines = Vec::new();
        for server in &self.servers {
            let state = server.state();
            if matches!(state, State::Disabled | State::Unavailable | State::Stopped) {
                continue;
            }
            let names: Vec<String> = server
                .tools()
                .iter()
                .filter(|e| !hidden(&e.name))
                .filter_map(|e| names::split(&e.name).map(|(_, tool)| tool.to_string()))
                .collect();
            let name = server.name();
            let note = match state {
                State::Restarting => " (restarting; its tools are unavailable for now)",
                _ => "",
            };
            let line = if names.is_empty() {
                match server.tools_from() {
                    ToolsFrom::None => format!(
                        "- {}*: MCP server \"{name}\", starting (its tools are not known yet)",
                        names::exposed(name, "")
                    ),
                    _ => continue,
                }
            } else {
                match detail {
                    Detail::Names => format!(
                        "- {}{{{}}}: tools of MCP server \"{name}\"{note}",
                        names::exposed(name, ""),
                        names.join(",")
                    ),
                    Detail::Counts => format!(
                        "- {}*: {} tools of MCP server \"{name}\"{note}",
                        names::exposed(name, ""),
                        names.len()
                    ),
                }
            };
            lines.push(line);
        }
        lines
    }
}

#[derive(Clone, Copy)]
enum Detail {
    Names,
    Counts,
}

impl ToolSource for McpTools {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .filter(|s| {
                !matches!(
                    s.state(),
                    State::Disabled | State::Unavailable | State::Stopped
                )
            })
            .flat_map(|server| {
                server
                    .tools()
                    .iter()
                    .map(|e| Arc::new(McpTool::new(Arc::clone(server), e.clone())) as Arc<dyn Tool>)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let (server_name, _) = names::split(name)?;
        let server = self.servers.iter().find(|s| {
            s.name() == server_name
                && !matches!(
                    s.state(),
                    State::Disabled | State::Unavailable | State::Stopped
                )
        })?;
        match server.tools().iter().find(|e| e.name == name) {
            Some(exposed) => Some(Arc::new(McpTool::new(Arc::clone(server), exposed.clone()))),
            // Its tools are being learned: the call waits for the server.
            None if server.tools_from() == ToolsFrom::None => {
                Some(Arc::new(McpTool::pending(Arc::clone(server), name)))
            }
            None => None,
        }
    }

    fn listing(&self, hidden: &dyn Fn(&str) -> bool) -> Vec<String> {
        let size = |lines: &[String]| lines.iter().map(|l| l.len() + 1).sum::<usize>();
        let named = self.lines(hidden, Detail::Names);
        if size(&named) <= LISTING_BUDGET {
            return named;
        }
        let counted = self.lines(hidden, Detail::Counts);
        let hint = "  (their names: tool_schema with [\"mcp__SERVER__*\"])".to_string();
        if size(&counted) + hint.len() <= LISTING_BUDGET {
            let mut lines = counted;
            lines.push(hint);
            return lines;
        }
        let servers: Vec<&str> = self
            .servers
            .iter()
            .filter(|s| !s.tools().is_empty())
            .map(|s| s.name())
            .collect();
        let mut shown = String::new();
        for name in &servers {
            if shown.len() + name.len() > LISTING_BUDGET / 2 {
                shown.push_str(",…");
                break;
            }
            if !shown.is_empty() {
                shown.push(',');
            }
            shown.push_str(name);
        }
        vec![format!(
            "- mcp__{{{shown}}}__*: tools of {} MCP servers; tool_schema with [\"mcp__SERVER__*\"] lists a server's",
            servers.len()
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerSpec;
    use crate::remote::RemoteTool;
    use crate::server::Supervision;

    /// A server (never started) whose remembered list has `n` tools.
    fn server(name: &str, n: usize) -> Arc<Server> {
        let tools = (0..n)
            .map(|i| RemoteTool {
                name: format!("tool_{i}"),
                description: format!("Tool {i}."),
                input_schema: serde_json::json!({"type": "object"}),
                read_only: None,
                destructive: None,
            })
            .collect();
        Server::new(
            ServerSpec::stdio(name, "true", &[]),
            crate::server::Places {
                workspace: ".".into(),
                servers: ".".into(),
            },
            Supervision::default(),
            None,
            Some(tools),
        )
    }

    fn size(lines: &[String]) -> usize {
        lines.iter().map(|l| l.len() + 1).sum()
    }

    #[test]
    fn few_tools_are_named_many_are_counted_always_within_the_budget() {
        let few = McpTools::new(vec![server("a", 3), server("b", 2)]);
        assert_eq!(
            few.listing(&|_| false),
            [
                "- mcp__a__{tool_0,tool_1,tool_2}: tools of MCP server \"a\"",
                "- mcp__b__{tool_0,tool_1}: tools of MCP server \"b\"",
            ]
        );
        let hidden = few.listing(&|name| name == "mcp__a__tool_1");
        assert!(hidden[0].contains("{tool_0,tool_2}"), "{hidden:?}");

        let many = McpTools::new(vec![server("a", 200), server("b", 5)]);
        let lines = many.listing(&|_| false);
        assert_eq!(lines[0], "- mcp__a__*: 200 tools of MCP server \"a\"");
        assert!(size(&lines) <= LISTING_BUDGET, "{lines:?}");

        let servers: Vec<Arc<Server>> =
            (0..60).map(|i| server(&format!("server{i}"), 50)).collect();
        let lines = McpTools::new(servers).listing(&|_| false);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("tools of 60 MCP servers"), "{lines:?}");
        assert!(size(&lines) <= LISTING_BUDGET, "{} bytes", size(&lines));
    }

    #[test]
    fn a_source_finds_its_tools_by_name() {
        let tools = McpTools::new(vec![server("a", 3)]);
        assert_eq!(tools.tools().len(), 3);
        assert_eq!(
            tools.get("mcp__a__tool_2").unwrap().spec().name(),
            "mcp__a__tool_2"
        );
        assert!(tools.get("mcp__a__tool_9").is_none());
        assert!(tools.get("mcp__b__tool_0").is_none());
        assert!(tools.get("shell").is_none());
    }
}
