//! Each agent's cost line (migration 25): spend per day and agent, added
//! with the call that records it, and an agent's share judged at admission.

use cairn_store::{AgentShare, CostLimits, LlmAdmission, Store};
use uuid::Uuid;

use crate::fixture::Fixture;
use crate::routines::at;

const UNLIMITED: CostLimits = CostLimits {
    budget_micros: None,
    hourly_limit: None,
};

fn share(agent: &str, budget_micros: Option<u64>) -> AgentShare<'_> {
    AgentShare {
        agent,
        budget_micros,
    }
}

async fn admit(s: &Store, secs: i64, limits: CostLimits, share: AgentShare<'_>) -> LlmAdmission {
    s.admit_agent_llm_call(at(secs), limits, share, true)
        .await
        .unwrap()
}

fn admitted(a: &LlmAdmission) -> Uuid {
    match a {
        LlmAdmission::Admitted { call_id, .. } => call_id.unwrap(),
        other => panic!("expected an admission, got {other:?}"),
    }
}

pub async fn each_agents_spend_adds_up_with_the_call_that_records_it(fx: &Fixture) {
    let s = &fx.store;
    let family = admitted(&admit(s, 0, UNLIMITED, share("family", None)).await);
    let main = admitted(&s.admit_llm_call(at(0), UNLIMITED, true).await.unwrap());
    s.finish_llm_call(family, "family", 300, Some("cheap-model"), at(1))
        .await
        .unwrap();
    let totals = s
        .finish_llm_call(main, "main", 500, Some("big-model"), at(1))
        .await
        .unwrap();
    assert_eq!(totals.spent_micros, 800, "the global total has both");
    // Finishing twice adds nothing to the agent either.
    s.finish_llm_call(family, "family", 300, Some("cheap-model"), at(2))
        .await
        .unwrap();
    // A failed call costs nothing and is no call.
    let failed = admitted(&admit(s, 3, UNLIMITED, share("family", None)).await);
    s.finish_llm_call(failed, "family", 0, None, at(4))
        .await
        .unwrap();
    let spent = s.agent_spend("family", at(5)).await.unwrap();
    assert_eq!((spent.spent_micros, spent.calls), (300, 1));
    assert_eq!(spent.reserved_micros, 0, "nothing in flight");
    assert_eq!(
        s.agent_spend("nobody", at(5)).await.unwrap().spent_micros,
        0
    );

    // Calls finished at once from two processes all count.
    let (a, _) = Store::open(&fx.url).await.unwrap();
    let (b, _) = Store::open(&fx.url).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..10 {
        ids.push(admitted(
            &admit(s, 10 + i, UNLIMITED, share("family", None)).await,
        ));
    }
    let tasks: Vec<_> = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move {
                store
                    .finish_llm_call(id, "family", 10, Some("cheap-model"), at(30))
                    .await
                    .unwrap();
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    a.close().await;
    b.close().await;

    // A cost learnt outside an admission counts too.
    s.add_agent_spend("coder", 70, false, at(40)).await.unwrap();
    let day = at(0).date_naive();
    let next = day + chrono::Duration::days(1);
    s.add_agent_spend("family", 5, true, at(86_400))
        .await
        .unwrap();
    let today: Vec<_> = s
        .agents_spend_on(day)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.agent, a.spent_micros, a.calls))
        .collect();
    assert_eq!(
        today,
        vec![
            ("coder".to_string(), 70, 0),
            ("family".to_string(), 400, 11),
            ("main".to_string(), 500, 1),
        ]
    );
    let history = s.cost_history(day).await.unwrap();
    let rows: Vec<_> = history
        .agents
        .iter()
        .map(|a| (a.day, a.agent.as_str(), a.spent_micros))
        .collect();
    assert_eq!(
        rows,
        vec![
            (day, "coder", 70),
            (day, "family", 400),
            (day, "main", 500),
            (next, "family", 5)
        ]
    );
    assert_eq!(s.cost_history(next).await.unwrap().agents.len(), 1);
}

pub async fn an_agent_over_its_share_is_refused_while_the_others_go_on(fx: &Fixture) {
    let s = &fx.store;
    let limits = CostLimits {
        budget_micros: Some(10_000),
        hourly_limit: None,
    };
    let family = share("family", Some(1_000));
    let first = admitted(&admit(s, 0, limits, family).await);
    s.finish_llm_call(first, "family", 600, Some("m"), at(1))
        .await
        .unwrap();
    // Main's dearest call is in flight: it reserves for main, not for family.
    let main = admitted(&s.admit_llm_call(at(2), limits, true).await.unwrap());
    // Family's call in flight reserves family's dearest (600): 600 + 600 >= 1000.
    let in_flight = admitted(&admit(s, 3, limits, family).await);
    match admit(s, 4, limits, family).await {
        LlmAdmission::OverShare { totals, agent } => {
            assert_eq!(agent.agent, "family");
            assert_eq!((agent.spent_micros, agent.reserved_micros), (600, 600));
            assert_eq!(totals.spent_micros, 600);
        }
        other => panic!("expected family's share to refuse, got {other:?}"),
    }
    // Main has no share: only the global budget holds it.
    admitted(&s.admit_llm_call(at(5), limits, true).await.unwrap());
    // Another agent's share is its own.
    admitted(&admit(s, 5, limits, share("coder", Some(1_000))).await);
    s.finish_llm_call(in_flight, "family", 300, Some("m"), at(6))
        .await
        .unwrap();
    // 900 spent, nothing in flight: below the share.
    let last = admitted(&admit(s, 7, limits, family).await);
    s.finish_llm_call(last, "family", 200, Some("m"), at(8))
        .await
        .unwrap();
    // A check sees the refusal and writes nothing.
    match s
        .admit_agent_llm_call(at(9), limits, family, false)
        .await
        .unwrap()
    {
        LlmAdmission::OverShare { agent, .. } => assert_eq!(agent.spent_micros, 1_100),
        other => panic!("expected family's share to refuse, got {other:?}"),
    }
    s.finish_llm_call(main, "main", 9_000, Some("m"), at(10))
        .await
        .unwrap();
    // The global budget speaks first once it is spent.
    assert!(matches!(
        admit(s, 11, limits, family).await,
        LlmAdmission::OverBudget { .. }
    ));
    // The next UTC day starts every line at zero.
    admitted(&admit(s, 86_400, limits, family).await);
}
