// Package readmodel is the dashboard's read model: the figures GET
// /api/v1/overview and /overview/heatmap answer (BuildOverview,
// BuildHeatmap), computed from the store alone, and the exact decimal
// rendering of money and quantities every JSON view uses (Amount,
// Scaled). It decides nothing: what it calls idle is the control loop's
// open idle alerts, what it calls spent is the ledger's. The REST API
// (internal/api) serves it; nothing here knows HTTP.
package readmodel
