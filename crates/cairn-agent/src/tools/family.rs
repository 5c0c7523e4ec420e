//! Families of tools: several tools over one shared state (`background_*`
//! over the task table, `routine_*` over the routine service), written as
//! one [`Family`] impl that answers each member's calls, and a table of the
//! members' specs ([`members`]), instead of a struct and a [`Tool`] impl per
//! tool.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{CallOutcome, CallPlan, Tool, ToolContext, ToolSpec};
use crate::runner::Authorized;

/// The shared state of a family of tools, which runs each member's calls.
#[async_trait]
pub trait Family: Send + Sync + 'static {
    /// Which member of the family a call is for.
    type Op: Copy + Send + Sync + 'static;

    /// The plan of one call of member `op` ([`Tool::plan`]); by default its
    /// spec's.
    fn plan(&self, op: Self::Op, spec: &ToolSpec, args: &Value) -> CallPlan {
        let _ = (op, args);
        spec.plan()
    }

    /// Runs one call of member `op` ([`Tool::execute`]): only the runner can
    /// call it, with the proof the gate hands over.
    async fn call(
        &self,
        op: Self::Op,
        args: Value,
        ctx: &ToolContext,
        authorized: &Authorized,
    ) -> CallOutcome;
}

/// One member of a family, as the registry holds it.
struct Member<F: Family> {
    spec: ToolSpec,
    op: F::Op,
    family: Arc<F>,
}

#[async_trait]
impl<F: Family> Tool for Member<F> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(&self, args: &Value) -> CallPlan {
        self.family.plan(self.op, &self.spec, args)
    }

    async fn execute(
        &self,
        args: Value,
        ctx: &ToolContext,
        authorized: &Authorized,
    ) -> CallOutcome {
        self.family.call(self.op, args, ctx, authorized).await
    }
}

/// The tools of `family`, one per `(op, spec)`, each spec put in the family
/// described by `text` ([`ToolSpec::in_family`]).
pub fn members<F: Family>(
    family: &Arc<F>,
    text: &'static str,
    specs: impl IntoIterator<Item = (F::Op, ToolSpec)>,
) -> Vec<Arc<dyn Tool>> {
    specs
        .into_iter()
        .map(|(op, spec)| {
            Arc::new(Member {
                spec: spec.in_family(text),
                op,
                family: Arc::clone(family),
            }) as Arc<dyn Tool>
        })
        .collect()
}
