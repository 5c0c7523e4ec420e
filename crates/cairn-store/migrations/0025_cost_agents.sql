-- Each agent's cost line (issue 45): spend per UTC day and agent, which
-- every finished LLM call adds its cost to (`spent_micros = spent_micros
-- + $n`, so processes add up), as cost_models does per model. An agent's
-- share of the daily budget is judged on its row at admission, with its
-- calls still in flight reserving its dearest call of the day
-- (`max_call_micros`), as cost_days does for the whole budget.
CREATE TABLE cost_agents (
    day             TEXT NOT NULL,
    agent           TEXT NOT NULL,
    spent_micros    BIGINT NOT NULL DEFAULT 0,
    max_call_micros BIGINT NOT NULL DEFAULT 0,
    calls           BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (day, agent)
);
-- The agent each admitted call is counted for; calls from before agents are main's.
ALTER TABLE llm_calls ADD COLUMN agent TEXT NOT NULL DEFAULT 'main';
