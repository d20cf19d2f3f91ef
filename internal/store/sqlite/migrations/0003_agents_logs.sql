-- 0003: node agents (what each machine reports, its silence state, the
-- highest record it has had applied), the commands queued for them, the
-- job events they reported that the control loop has not yet acted on,
-- and job logs (chunks at stable offsets per job; per-stream ends make
-- uploads idempotent). Keep in step with ../../postgres/migrations.

CREATE TABLE agents (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	lease_id TEXT NOT NULL,
	offer_id TEXT NOT NULL,
	version TEXT NOT NULL,
	source TEXT NOT NULL,
	gpus TEXT NOT NULL,
	running TEXT NOT NULL,
	state TEXT NOT NULL CHECK (state IN ('ok', 'suspect', 'down')),
	state_at INTEGER NOT NULL,
	joined_at INTEGER NOT NULL,
	last_seen_at INTEGER NOT NULL,
	epoch TEXT NOT NULL,
	applied_seq INTEGER NOT NULL CHECK (applied_seq >= 0),
	backlog INTEGER NOT NULL CHECK (backlog >= 0)
);
CREATE INDEX agents_lease ON agents (lease_id) WHERE lease_id <> '';

CREATE TABLE agent_commands (
	seq INTEGER PRIMARY KEY,
	id TEXT NOT NULL UNIQUE,
	agent_id TEXT NOT NULL REFERENCES agents (id),
	kind TEXT NOT NULL CHECK (kind IN ('run', 'checkpoint', 'stop', 'kill')),
	unit TEXT NOT NULL,
	job_id TEXT NOT NULL,
	team_id TEXT NOT NULL,
	run_id TEXT NOT NULL,
	spec TEXT NOT NULL,
	reason TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	acked_at INTEGER,
	result TEXT NOT NULL
);
CREATE INDEX agent_commands_pending ON agent_commands (agent_id, seq) WHERE acked_at IS NULL;

-- Rows are deleted once the loop has acted on them; AUTOINCREMENT keeps
-- their numbers rising across that.
CREATE TABLE agent_reports (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id TEXT NOT NULL,
	kind TEXT NOT NULL,
	run_id TEXT NOT NULL,
	at INTEGER NOT NULL,
	reason TEXT NOT NULL,
	attrs TEXT NOT NULL
);

CREATE TABLE job_log_heads (
	job_id TEXT PRIMARY KEY REFERENCES jobs (id),
	end_off INTEGER NOT NULL CHECK (end_off >= 0)
) WITHOUT ROWID;

CREATE TABLE job_log_streams (
	job_id TEXT NOT NULL REFERENCES jobs (id),
	stream TEXT NOT NULL,
	end_off INTEGER NOT NULL CHECK (end_off >= 0),
	PRIMARY KEY (job_id, stream)
) WITHOUT ROWID;

CREATE TABLE job_logs (
	job_id TEXT NOT NULL REFERENCES jobs (id),
	off INTEGER NOT NULL CHECK (off >= 0),
	stream TEXT NOT NULL,
	stream_off INTEGER NOT NULL CHECK (stream_off >= 0),
	data BLOB NOT NULL,
	at INTEGER NOT NULL,
	PRIMARY KEY (job_id, off)
) WITHOUT ROWID;
CREATE INDEX job_logs_at ON job_logs (at);
