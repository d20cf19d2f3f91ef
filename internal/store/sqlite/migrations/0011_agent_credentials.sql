-- 0011: agent credentials bound to leases and agents (store.Token's Kind,
-- Lease and Agent; store.Agent's TokenID). A join token (kind 'join') is
-- minted for one lease when it is acquired and is claimed by the first
-- agent that joins with it (agent_id); the agent then gets a credential
-- of its own (kind 'agent') good for that agent id only. An agent row
-- names the credential it joined with (token_id): another credential may
-- not speak for it while that one is active. Keep in step with
-- ../../postgres/migrations.

ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT '' CHECK (kind IN ('', 'join', 'agent'));
ALTER TABLE tokens ADD COLUMN lease_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_lease ON tokens (lease_id) WHERE lease_id <> '';

ALTER TABLE agents ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
