//! What every turn starts from, whoever runs it (a chat session, or a
//! stateless API request): the agent's system prompt and the tool context.

use tokio_util::sync::CancellationToken;

use super::ChatService;
use crate::agent_loop::AgentLoop;
use crate::prompt::{PromptContext, build_system_prompt};
use crate::tools::ToolContext;

impl ChatService {
    /// The system prompt of a turn answered by `agent` (this service's, or
    /// a copy with another model or per-request settings), as of now.
    pub async fn system_prompt(&self, agent: &AgentLoop) -> String {
        build_system_prompt(&PromptContext {
            agent_name: self.settings.agent_name.clone(),
            workspace: self.settings.workspace.clone(),
            timezone: self.settings.timezone,
            now: self.sessions.clock().now(),
            model: agent.model().to_string(),
            tools: agent.runner().definitions(),
            more_tools: agent.runner().on_demand_listing(),
            runtime: self.settings.runtime.clone(),
            skill_paths: self.settings.skill_paths.clone(),
        })
        .await
    }

    /// The tool context of a turn in `session`: the workspace, time zone,
    /// clock and tool limits of this service, stopped by `cancel`.
    pub fn tool_context(&self, session: &str, cancel: CancellationToken) -> ToolContext {
        ToolContext::new(&self.settings.workspace, session)
            .with_cancel(cancel)
            .with_timezone(self.settings.timezone)
            .with_clock(std::sync::Arc::clone(self.sessions.clock()))
            .with_limits(self.settings.tool_limits.clone())
    }
}
