-- 0013: the terms a committed lease was billed on before its current one
-- (a JSON array of {mode, start}, oldest first; core.Lease.Earlier),
-- appended when it renews on another term of its offer, and when its
-- billing began (first_start_at; NULL in rows written before: start_at),
-- which the usage report's held-in-range filter reads. Keep in step with
-- ../../postgres/migrations.

ALTER TABLE leases ADD COLUMN earlier_terms TEXT NOT NULL DEFAULT '[]';
ALTER TABLE leases ADD COLUMN first_start_at INTEGER;
