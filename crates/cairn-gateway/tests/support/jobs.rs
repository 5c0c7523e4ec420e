//! A job scheduler for a test gateway: over the gateway's own store, its
//! jobs answered by their own fake LLM server, with no tools.

use std::sync::Arc;

use cairn_agent::tools::ToolContext;
use cairn_agent::{JobScheduler, PolicyGate, ToolPolicyConfig, ToolRegistry, ToolRunner};
use cairn_gateway::Gateway;
use cairn_llm::build_provider;
use cairn_llm::testing::FakeLlmServer;

/// What jobs need that outlives the gateway's construction.
pub struct Jobs {
    /// The model jobs talk to.
    pub llm: FakeLlmServer,
    /// Where jobs work.
    pub workspace: tempfile::TempDir,
}

impl Jobs {
    /// A fake LLM server and a workspace for jobs.
    pub async fn new() -> Jobs {
        Jobs {
            llm: FakeLlmServer::start().await.unwrap(),
            workspace: tempfile::tempdir().unwrap(),
        }
    }

    /// `gateway` with a scheduler over its store, for `TestGateway::start_with`.
    pub fn attach(&self, gateway: Gateway) -> (Gateway, Arc<JobScheduler>) {
        let provider = build_provider(&self.llm.openai_settings()).unwrap();
        let runner = Arc::new(ToolRunner::new(
            Arc::new(ToolRegistry::new()),
            Arc::new(PolicyGate::new(&ToolPolicyConfig::default())),
        ));
        let ctx = ToolContext::new(self.workspace.path(), "jobs");
        let scheduler =
            Arc::new(JobScheduler::builder(gateway.store().clone(), provider, runner, ctx).build());
        (gateway.with_jobs(scheduler.clone()), scheduler)
    }
}
