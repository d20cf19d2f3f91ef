-- 0005: a team's unit limit (0: the default), the quota on the units its
-- unfinished jobs may have together, and the index that counts them.
-- Keep in step with ../../sqlite/migrations.

ALTER TABLE teams ADD COLUMN unit_limit BIGINT NOT NULL DEFAULT 0 CHECK (unit_limit >= 0);
CREATE INDEX jobs_team_live ON jobs (team_id) WHERE state NOT IN ('succeeded', 'failed', 'cancelled');
