-- 0004: the units a lease was rented for (a JSON array of unit keys),
-- written with the intent and never changed, so that a restart keeps what
-- the autostop baseline waits on. Keep in step with ../../sqlite/migrations.

ALTER TABLE leases ADD COLUMN rented_for TEXT NOT NULL DEFAULT '[]';
