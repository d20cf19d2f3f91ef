-- 0009: per sample, the GPU's compute processes per run placed on it
-- (core.Sample.Procs) as a JSON object of run ID to count; '' when the
-- GPU source does not list processes. The loop's zombie rung reads it.
-- Keep in step with ../../postgres/migrations.

ALTER TABLE samples ADD COLUMN procs TEXT NOT NULL DEFAULT '';
