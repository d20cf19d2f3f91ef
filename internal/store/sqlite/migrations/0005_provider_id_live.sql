-- 0005: a provider id names one live lease, not one lease for ever. A
-- provider may hand an id out again once its machine is gone (the sim
-- provider numbers machines afresh in each process, an exec script may
-- name machines by host), so uniqueness covers the leases not in a final
-- state; ended leases keep their id for the audit trail and for
-- reconcile's look-up of a machine whose release was lost. Keep in step
-- with ../../postgres/migrations.

DROP INDEX leases_provider_id;
CREATE UNIQUE INDEX leases_provider_id_live ON leases (provider_id)
	WHERE provider_id <> '' AND state NOT IN ('released', 'reclaimed', 'failed');
CREATE INDEX leases_provider_id ON leases (provider_id, seq) WHERE provider_id <> '';
