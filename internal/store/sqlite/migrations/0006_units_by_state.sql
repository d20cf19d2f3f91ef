-- 0006: units by state, so that the runs in progress (ListRunning) read
-- the running units only, and the waiting counts (CountWaiting) count
-- from this index alone, not from the units' rows or the whole history.
-- Not a partial index: SQLite uses one only when the query repeats its
-- condition. Keep in step with ../../postgres/migrations.

CREATE INDEX job_units_state ON job_units (state, job_id);
