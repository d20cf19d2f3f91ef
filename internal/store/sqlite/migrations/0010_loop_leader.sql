-- 0010: the control loop's leader as it recorded itself on taking the
-- leadership lock (store.Leadership): the replica, since when, and the
-- term, which counts takeovers. One row; the lock decides who leads, the
-- row tells the followers (and /readyz) who does. Keep in step with
-- ../../postgres/migrations.

CREATE TABLE loop_leader (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	replica TEXT NOT NULL,
	since INTEGER NOT NULL,
	term INTEGER NOT NULL CHECK (term >= 1)
);
