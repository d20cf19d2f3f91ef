-- 0008: a team's unit limit (0: the default) and its queued units, the
-- units of its unfinished jobs: SubmitJob counts a new job's units in
-- (refusing it past the limit), a job's move to a final state counts
-- them out. Keep in step with ../../sqlite/migrations.

ALTER TABLE teams ADD COLUMN unit_limit BIGINT NOT NULL DEFAULT 0 CHECK (unit_limit >= 0);
ALTER TABLE teams ADD COLUMN queued_units BIGINT NOT NULL DEFAULT 0 CHECK (queued_units >= 0);
UPDATE teams SET queued_units = (SELECT COALESCE(SUM(CASE WHEN shards > 1 THEN shards ELSE 1 END), 0) FROM jobs
	WHERE jobs.team_id = teams.id AND jobs.state NOT IN ('succeeded', 'failed', 'cancelled'));
