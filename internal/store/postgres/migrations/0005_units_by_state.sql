-- 0005: live units by state, so that the runs in progress (ListRunning)
-- and the waiting counts (CountWaiting) read the units in those states
-- only, not the whole queue or history. Keep in step with
-- ../../sqlite/migrations.

CREATE INDEX job_units_state ON job_units (state) WHERE state NOT IN ('succeeded', 'failed', 'cancelled');
