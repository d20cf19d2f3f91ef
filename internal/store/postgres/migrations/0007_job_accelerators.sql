-- 0007: what a job does (workload: training or inference; '' is training)
-- and the accelerator families it is built for (a JSON array; null is
-- NVIDIA only). Keep in step with ../../sqlite/migrations.

ALTER TABLE jobs ADD COLUMN workload TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN accelerators JSONB NOT NULL DEFAULT 'null';
