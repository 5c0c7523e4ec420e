-- Spend per UTC day and model (issue 26: the dashboard's costs page).
-- cost_days stays the budget's total; this adds who spent it. Every
-- answered LLM call adds its cost and one call to its (day, model) row
-- with `spent_micros = spent_micros + $n`, so processes add up.
CREATE TABLE cost_models (
    day          TEXT NOT NULL,
    model        TEXT NOT NULL,
    spent_micros BIGINT NOT NULL DEFAULT 0,
    calls        BIGINT NOT NULL DEFAULT 0,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (day, model)
);
