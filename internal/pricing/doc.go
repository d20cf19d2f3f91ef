// Package pricing holds gpufleet's price catalogs: what each provider rents
// (core.Offer) and how it is paid for (core.PricePlan), plus the vouchers
// that subsidise it (core.Voucher).
//
// A Catalog is read from the canonical YAML form (ParseYAML, Load), which
// expresses every plan feature core knows — per-period prices, billing
// granularity and minimum charge, committed terms with early-termination
// rules, spot prices fixed or as a series with a reclaim model, time-of-use
// windows — or from the canonical CSV form for bulk catalogs (ReadCSV), or
// imported from a provider's own price list (ImportAWS). WriteYAML and
// WriteCSV write the canonical forms back; reading what they wrote gives the
// same catalog.
//
// Money never passes through a float: prices are decimal text converted with
// core.ParseMicros, shares and multipliers are parsed as decimals into basis
// points. Every error from a reader names the file, the line, the field and
// the value, and says what is allowed (ParseError). The schema is documented
// in docs/catalog.md.
//
// Demo returns the embedded demo catalog that "gpufleet serve" uses when it
// is given none.
package pricing

// Time-of-use windows name IANA zones; resolve them without the host's tz
// database.
import _ "time/tzdata"
