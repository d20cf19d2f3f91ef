-- 0002: tokens keep a public prefix, events name the team they concern (team roles read their own
-- trail), alerts can be acknowledged, and units' finished runs are kept
-- (reports allocate cost to teams after a unit's parts are cleared). Keep
-- in step with ../../postgres/migrations.

ALTER TABLE events ADD COLUMN team_id TEXT NOT NULL DEFAULT '';
CREATE INDEX events_team ON events (team_id, seq);

-- A token's public prefix ("gpf_" and a few characters of the secret)
-- names it in listings and leak scans without revealing it.
ALTER TABLE tokens ADD COLUMN prefix TEXT NOT NULL DEFAULT '';

ALTER TABLE alerts ADD COLUMN acked_at INTEGER;
ALTER TABLE alerts ADD COLUMN acked_by TEXT NOT NULL DEFAULT '';

-- unit_runs is written only by the trigger below: a run ends when a
-- running (or checkpointing) unit stops running, or starts again
-- elsewhere (a move sets a new start).
CREATE TABLE unit_runs (
	seq INTEGER PRIMARY KEY,
	job_id TEXT NOT NULL,
	shard INTEGER NOT NULL,
	parts TEXT NOT NULL,
	start_at INTEGER NOT NULL,
	end_at INTEGER NOT NULL
);
CREATE INDEX unit_runs_end ON unit_runs (end_at);

CREATE TRIGGER job_units_run_ended AFTER UPDATE ON job_units
WHEN OLD.state IN ('running', 'checkpointing') AND OLD.start_at IS NOT NULL AND OLD.parts NOT IN ('null', '[]')
	AND (NEW.state NOT IN ('running', 'checkpointing') OR NEW.start_at IS NOT OLD.start_at)
BEGIN
	INSERT INTO unit_runs (job_id, shard, parts, start_at, end_at)
	SELECT OLD.job_id, OLD.shard, OLD.parts, OLD.start_at, e
	FROM (SELECT CASE WHEN NEW.state IN ('running', 'checkpointing') THEN NEW.start_at
		ELSE COALESCE(NEW.end_at, NEW.since_at) END AS e)
	WHERE e > OLD.start_at;
END;
