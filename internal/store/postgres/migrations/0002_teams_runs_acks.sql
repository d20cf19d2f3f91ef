-- 0002: tokens keep a public prefix, events name the team they concern (team roles read their own
-- trail), alerts can be acknowledged, and units' finished runs are kept
-- (reports allocate cost to teams after a unit's parts are cleared). Keep
-- in step with ../../sqlite/migrations.

ALTER TABLE events ADD COLUMN team_id TEXT NOT NULL DEFAULT '';
CREATE INDEX events_team ON events (team_id, seq);

-- A token's public prefix ("gpf_" and a few characters of the secret)
-- names it in listings and leak scans without revealing it.
ALTER TABLE tokens ADD COLUMN prefix TEXT NOT NULL DEFAULT '';

ALTER TABLE alerts ADD COLUMN acked_at TIMESTAMPTZ;
ALTER TABLE alerts ADD COLUMN acked_by TEXT NOT NULL DEFAULT '';

-- unit_runs is written only by the trigger below: a run ends when a
-- running (or checkpointing) unit stops running, or starts again
-- elsewhere (a move sets a new start).
CREATE TABLE unit_runs (
	seq BIGSERIAL PRIMARY KEY,
	job_id TEXT NOT NULL,
	shard BIGINT NOT NULL,
	parts JSONB NOT NULL,
	start_at TIMESTAMPTZ NOT NULL,
	end_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX unit_runs_end ON unit_runs (end_at);

CREATE FUNCTION job_units_run_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE e TIMESTAMPTZ;
BEGIN
	IF OLD.state IN ('running', 'checkpointing') AND OLD.start_at IS NOT NULL
		AND jsonb_typeof(OLD.parts) = 'array' AND jsonb_array_length(OLD.parts) > 0
		AND (NEW.state NOT IN ('running', 'checkpointing') OR NEW.start_at IS DISTINCT FROM OLD.start_at) THEN
		IF NEW.state IN ('running', 'checkpointing') THEN
			e := NEW.start_at;
		ELSE
			e := COALESCE(NEW.end_at, NEW.since_at);
		END IF;
		IF e > OLD.start_at THEN
			INSERT INTO unit_runs (job_id, shard, parts, start_at, end_at) VALUES (OLD.job_id, OLD.shard, OLD.parts, OLD.start_at, e);
		END IF;
	END IF;
	RETURN NULL;
END;
$$;
CREATE TRIGGER job_units_run_ended AFTER UPDATE ON job_units
	FOR EACH ROW EXECUTE FUNCTION job_units_run_ended();
