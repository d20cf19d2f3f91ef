-- 0012: the loop's inbox: the jobs submitted or cancelled through the API
-- since the control loop last looked (store.Loop.TakeInbox). The loop
-- keeps its state in memory across ticks and reads only these, so a
-- tick's cost follows what changed, not the length of the queue. Rows are
-- taken (deleted) in the loop's transaction: one committed after it is
-- there for the next. Keep in step with ../../postgres/migrations.

CREATE TABLE loop_inbox (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	job_id TEXT NOT NULL
);
