-- gpufleet schema, SQLite dialect. Times are INTEGER unix microseconds in
-- UTC (NULL: none); money is INTEGER micro-units; GPU shares INTEGER
-- milli-GPUs; durations INTEGER nanoseconds; booleans INTEGER 0/1; lists
-- and maps JSON text. Sequences (seq, id) are INTEGER PRIMARY KEY rowids
-- without AUTOINCREMENT: rows of those tables are never deleted, so a
-- rowid is never reused, and an insert writes one page less. Keep in step
-- with ../../postgres/migrations.

CREATE TABLE teams (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	cohort TEXT NOT NULL,
	weight INTEGER NOT NULL CHECK (weight >= 0),
	monthly_budget_micros INTEGER NOT NULL CHECK (monthly_budget_micros >= 0)
);

CREATE TABLE team_quotas (
	team_id TEXT NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
	ord INTEGER NOT NULL,
	gpu_class TEXT NOT NULL,
	guaranteed_milli INTEGER NOT NULL CHECK (guaranteed_milli >= 0),
	borrow_limit_milli INTEGER NOT NULL,
	lend_limit_milli INTEGER NOT NULL,
	PRIMARY KEY (team_id, gpu_class)
);

CREATE TABLE users (
	id TEXT PRIMARY KEY,
	team_id TEXT REFERENCES teams (id),
	name TEXT NOT NULL,
	email TEXT NOT NULL,
	role TEXT NOT NULL CHECK (role IN ('admin', 'team-admin', 'member', 'viewer', 'agent')),
	created_at INTEGER NOT NULL,
	disabled_at INTEGER
);
CREATE INDEX users_team ON users (team_id, id);

CREATE TABLE tokens (
	id TEXT PRIMARY KEY,
	hash BLOB NOT NULL UNIQUE,
	user_id TEXT REFERENCES users (id),
	team_id TEXT REFERENCES teams (id),
	role TEXT NOT NULL CHECK (role IN ('admin', 'team-admin', 'member', 'viewer', 'agent')),
	name TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER,
	revoked_at INTEGER,
	last_used_at INTEGER
);
CREATE INDEX tokens_user ON tokens (user_id, id);
CREATE INDEX tokens_team ON tokens (team_id, id);

CREATE TABLE jobs (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	team_id TEXT NOT NULL REFERENCES teams (id),
	user_name TEXT NOT NULL,
	tier TEXT NOT NULL CHECK (tier IN ('core', 'regular', 'offline')),
	state TEXT NOT NULL CHECK (state IN ('pending', 'admitted', 'running', 'checkpointing', 'preempted', 'succeeded', 'failed', 'cancelled')),
	state_at INTEGER NOT NULL,
	gpus INTEGER NOT NULL CHECK (gpus >= 1),
	milli_per_gpu INTEGER NOT NULL CHECK (milli_per_gpu BETWEEN 1 AND 1000),
	mem_per_gpu_mib INTEGER NOT NULL CHECK (mem_per_gpu_mib >= 0),
	models TEXT NOT NULL,
	throughput TEXT NOT NULL,
	cpu_milli INTEGER NOT NULL CHECK (cpu_milli >= 0),
	mem_mib INTEGER NOT NULL CHECK (mem_mib >= 0),
	shards INTEGER NOT NULL CHECK (shards >= 0),
	est_duration_ns INTEGER NOT NULL CHECK (est_duration_ns >= 0),
	deadline INTEGER,
	interruptible INTEGER NOT NULL,
	may_defer INTEGER NOT NULL,
	checkpoint_interval_ns INTEGER NOT NULL CHECK (checkpoint_interval_ns >= 0),
	command TEXT NOT NULL,
	image TEXT NOT NULL,
	submit_at INTEGER NOT NULL,
	idem_key TEXT,
	fingerprint BLOB,
	UNIQUE (team_id, idem_key)
);
CREATE INDEX jobs_team ON jobs (team_id, seq);
CREATE INDEX jobs_state ON jobs (state, seq);

CREATE TABLE job_units (
	job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	shard INTEGER NOT NULL CHECK (shard >= 0),
	state TEXT NOT NULL CHECK (state IN ('pending', 'admitted', 'running', 'checkpointing', 'preempted', 'succeeded', 'failed', 'cancelled')),
	parts TEXT NOT NULL,
	start_at INTEGER,
	last_checkpoint_at INTEGER,
	done_ns INTEGER NOT NULL CHECK (done_ns >= 0),
	since_at INTEGER,
	deferred_until INTEGER,
	reclaims INTEGER NOT NULL CHECK (reclaims >= 0),
	preemptions INTEGER NOT NULL CHECK (preemptions >= 0),
	no_spot INTEGER NOT NULL,
	lost_milli_seconds INTEGER NOT NULL CHECK (lost_milli_seconds >= 0),
	end_at INTEGER,
	PRIMARY KEY (job_id, shard)
) WITHOUT ROWID;
CREATE INDEX job_units_live ON job_units (job_id, shard) WHERE state NOT IN ('succeeded', 'failed', 'cancelled');

CREATE TABLE leases (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	offer_id TEXT NOT NULL,
	mode TEXT NOT NULL CHECK (mode IN ('on-demand', 'spot', 'daily', 'weekly', 'monthly')),
	state TEXT NOT NULL CHECK (state IN ('requested', 'provisioning', 'ready', 'draining', 'released', 'reclaimed', 'failed')),
	client_token TEXT NOT NULL UNIQUE,
	provider_id TEXT NOT NULL,
	requested_at INTEGER NOT NULL,
	start_at INTEGER,
	committed_end INTEGER,
	end_at INTEGER,
	ready_at INTEGER,
	reclaim_at INTEGER,
	idle_since INTEGER
);
CREATE UNIQUE INDEX leases_provider_id ON leases (provider_id) WHERE provider_id <> '';
CREATE INDEX leases_live ON leases (seq) WHERE state NOT IN ('released', 'reclaimed', 'failed');
CREATE INDEX leases_state ON leases (state, seq);

CREATE TABLE events (
	seq INTEGER PRIMARY KEY,
	at INTEGER NOT NULL,
	kind TEXT NOT NULL,
	subject TEXT NOT NULL,
	reason TEXT NOT NULL,
	attrs TEXT NOT NULL
);
CREATE INDEX events_subject ON events (subject, seq);
CREATE INDEX events_kind ON events (kind, seq);
CREATE INDEX events_at ON events (at);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
	SELECT RAISE(ABORT, 'events are append-only');
END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
	SELECT RAISE(ABORT, 'events are append-only');
END;

CREATE TABLE samples (
	lease_id TEXT NOT NULL,
	gpu INTEGER NOT NULL CHECK (gpu >= 0),
	at INTEGER NOT NULL,
	util_pct INTEGER NOT NULL CHECK (util_pct BETWEEN 0 AND 100),
	mem_used_mib INTEGER NOT NULL,
	mem_total_mib INTEGER NOT NULL,
	power_w INTEGER NOT NULL,
	temp_c INTEGER NOT NULL,
	PRIMARY KEY (lease_id, gpu, at)
) WITHOUT ROWID;
CREATE INDEX samples_at ON samples (at);

CREATE TABLE alerts (
	id INTEGER PRIMARY KEY,
	kind TEXT NOT NULL,
	lease_id TEXT NOT NULL,
	gpu INTEGER NOT NULL,
	unit TEXT NOT NULL,
	team_id TEXT NOT NULL,
	action TEXT NOT NULL,
	reason TEXT NOT NULL,
	raised_at INTEGER NOT NULL,
	resolved_at INTEGER
);
CREATE UNIQUE INDEX alerts_open ON alerts (kind, lease_id, gpu, unit, team_id) WHERE resolved_at IS NULL;
CREATE INDEX alerts_team ON alerts (team_id, id);

CREATE TABLE loop_state (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL,
	doc TEXT NOT NULL
);
