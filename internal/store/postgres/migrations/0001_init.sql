-- gpufleet schema, PostgreSQL dialect. Times are TIMESTAMPTZ (NULL: none);
-- money is BIGINT micro-units; GPU shares BIGINT milli-GPUs; durations
-- BIGINT nanoseconds; lists and maps JSONB. Unqualified names: the schema
-- is the connection's search_path. Keep in step with
-- ../../sqlite/migrations.

CREATE TABLE teams (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	cohort TEXT NOT NULL,
	weight BIGINT NOT NULL CHECK (weight >= 0),
	monthly_budget_micros BIGINT NOT NULL CHECK (monthly_budget_micros >= 0)
);

CREATE TABLE team_quotas (
	team_id TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
	ord BIGINT NOT NULL,
	gpu_class TEXT NOT NULL,
	guaranteed_milli BIGINT NOT NULL CHECK (guaranteed_milli >= 0),
	borrow_limit_milli BIGINT NOT NULL,
	lend_limit_milli BIGINT NOT NULL,
	PRIMARY KEY (team_id, gpu_class)
);

CREATE TABLE users (
	id TEXT PRIMARY KEY,
	team_id TEXT REFERENCES teams (id),
	name TEXT NOT NULL,
	email TEXT NOT NULL,
	role TEXT NOT NULL CHECK (role IN ('admin', 'team-admin', 'member', 'viewer', 'agent')),
	created_at TIMESTAMPTZ NOT NULL,
	disabled_at TIMESTAMPTZ
);
CREATE INDEX users_team ON users (team_id, id);

CREATE TABLE tokens (
	id TEXT PRIMARY KEY,
	hash BYTEA NOT NULL UNIQUE,
	user_id TEXT REFERENCES users (id),
	team_id TEXT REFERENCES teams (id),
	role TEXT NOT NULL CHECK (role IN ('admin', 'team-admin', 'member', 'viewer', 'agent')),
	name TEXT NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	expires_at TIMESTAMPTZ,
	revoked_at TIMESTAMPTZ,
	last_used_at TIMESTAMPTZ
);
CREATE INDEX tokens_user ON tokens (user_id, id);
CREATE INDEX tokens_team ON tokens (team_id, id);

CREATE TABLE jobs (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	team_id TEXT NOT NULL REFERENCES teams (id),
	user_name TEXT NOT NULL,
	tier TEXT NOT NULL CHECK (tier IN ('core', 'regular', 'offline')),
	state TEXT NOT NULL CHECK (state IN ('pending', 'admitted', 'running', 'checkpointing', 'preempted', 'succeeded', 'failed', 'cancelled')),
	state_at TIMESTAMPTZ NOT NULL,
	gpus BIGINT NOT NULL CHECK (gpus >= 1),
	milli_per_gpu BIGINT NOT NULL CHECK (milli_per_gpu BETWEEN 1 AND 1000),
	mem_per_gpu_mib BIGINT NOT NULL CHECK (mem_per_gpu_mib >= 0),
	models JSONB NOT NULL,
	throughput JSONB NOT NULL,
	cpu_milli BIGINT NOT NULL CHECK (cpu_milli >= 0),
	mem_mib BIGINT NOT NULL CHECK (mem_mib >= 0),
	shards BIGINT NOT NULL CHECK (shards >= 0),
	est_duration_ns BIGINT NOT NULL CHECK (est_duration_ns >= 0),
	deadline TIMESTAMPTZ,
	interruptible BOOLEAN NOT NULL,
	may_defer BOOLEAN NOT NULL,
	checkpoint_interval_ns BIGINT NOT NULL CHECK (checkpoint_interval_ns >= 0),
	command JSONB NOT NULL,
	image TEXT NOT NULL,
	submit_at TIMESTAMPTZ NOT NULL,
	idem_key TEXT,
	fingerprint BYTEA,
	UNIQUE (team_id, idem_key)
);
CREATE INDEX jobs_team ON jobs (team_id, seq);
CREATE INDEX jobs_state ON jobs (state, seq);

CREATE TABLE job_units (
	job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	shard BIGINT NOT NULL CHECK (shard >= 0),
	state TEXT NOT NULL CHECK (state IN ('pending', 'admitted', 'running', 'checkpointing', 'preempted', 'succeeded', 'failed', 'cancelled')),
	parts JSONB NOT NULL,
	start_at TIMESTAMPTZ,
	last_checkpoint_at TIMESTAMPTZ,
	done_ns BIGINT NOT NULL CHECK (done_ns >= 0),
	since_at TIMESTAMPTZ,
	deferred_until TIMESTAMPTZ,
	reclaims BIGINT NOT NULL CHECK (reclaims >= 0),
	preemptions BIGINT NOT NULL CHECK (preemptions >= 0),
	no_spot BOOLEAN NOT NULL,
	lost_milli_seconds BIGINT NOT NULL CHECK (lost_milli_seconds >= 0),
	end_at TIMESTAMPTZ,
	PRIMARY KEY (job_id, shard)
);
CREATE INDEX job_units_live ON job_units (job_id, shard) WHERE state NOT IN ('succeeded', 'failed', 'cancelled');

CREATE TABLE leases (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	offer_id TEXT NOT NULL,
	mode TEXT NOT NULL CHECK (mode IN ('on-demand', 'spot', 'daily', 'weekly', 'monthly')),
	state TEXT NOT NULL CHECK (state IN ('requested', 'provisioning', 'ready', 'draining', 'released', 'reclaimed', 'failed')),
	client_token TEXT NOT NULL UNIQUE,
	provider_id TEXT NOT NULL,
	requested_at TIMESTAMPTZ NOT NULL,
	start_at TIMESTAMPTZ,
	committed_end TIMESTAMPTZ,
	end_at TIMESTAMPTZ,
	ready_at TIMESTAMPTZ,
	reclaim_at TIMESTAMPTZ,
	idle_since TIMESTAMPTZ
);
CREATE UNIQUE INDEX leases_provider_id ON leases (provider_id) WHERE provider_id <> '';
CREATE INDEX leases_live ON leases (seq) WHERE state NOT IN ('released', 'reclaimed', 'failed');
CREATE INDEX leases_state ON leases (state, seq);

CREATE TABLE events (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at TIMESTAMPTZ NOT NULL,
	kind TEXT NOT NULL,
	subject TEXT NOT NULL,
	reason TEXT NOT NULL,
	attrs JSONB NOT NULL
);
CREATE INDEX events_subject ON events (subject, seq);
CREATE INDEX events_kind ON events (kind, seq);
CREATE INDEX events_at ON events (at);
CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'events are append-only';
END;
$$;
CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON events
	FOR EACH ROW EXECUTE FUNCTION events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
	FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();

CREATE TABLE samples (
	lease_id TEXT NOT NULL,
	gpu BIGINT NOT NULL CHECK (gpu >= 0),
	at TIMESTAMPTZ NOT NULL,
	util_pct BIGINT NOT NULL CHECK (util_pct BETWEEN 0 AND 100),
	mem_used_mib BIGINT NOT NULL,
	mem_total_mib BIGINT NOT NULL,
	power_w BIGINT NOT NULL,
	temp_c BIGINT NOT NULL,
	PRIMARY KEY (lease_id, gpu, at)
);
CREATE INDEX samples_at ON samples (at);

CREATE TABLE alerts (
	id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	kind TEXT NOT NULL,
	lease_id TEXT NOT NULL,
	gpu BIGINT NOT NULL,
	unit TEXT NOT NULL,
	team_id TEXT NOT NULL,
	action TEXT NOT NULL,
	reason TEXT NOT NULL,
	raised_at TIMESTAMPTZ NOT NULL,
	resolved_at TIMESTAMPTZ
);
CREATE UNIQUE INDEX alerts_open ON alerts (kind, lease_id, gpu, unit, team_id) WHERE resolved_at IS NULL;
CREATE INDEX alerts_team ON alerts (team_id, id);

CREATE TABLE loop_state (
	id BIGINT PRIMARY KEY CHECK (id = 1),
	version BIGINT NOT NULL,
	doc JSONB NOT NULL
);
