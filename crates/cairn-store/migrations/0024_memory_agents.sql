-- Memory per agent (issue 45): each document belongs to the agent that
-- stored it, and is seen by that agent only unless `shared` (0/1) makes it
-- visible to every agent. Documents from before agents are `main`'s.
-- Keys are unique per agent, so two agents may each keep a "coffee".
ALTER TABLE memory_docs ADD COLUMN agent TEXT NOT NULL DEFAULT 'main';
ALTER TABLE memory_docs ADD COLUMN shared BIGINT NOT NULL DEFAULT 0;

DROP INDEX memory_docs_key;
CREATE UNIQUE INDEX memory_docs_key ON memory_docs (user_id, agent, doc_key) WHERE doc_key IS NOT NULL;
