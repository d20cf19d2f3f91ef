package readmodel

import (
	"encoding/json"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Amount renders micros as an exact JSON number in currency units: 900,
// 21.958 — never a float's 899.9999.
func Amount(m core.Micros) json.Number { return json.Number(m.Decimal()) }

// Scaled renders n/unit as an exact decimal (unit a power of ten).
func Scaled(n, unit int64) json.Number {
	return Amount(core.Micros(core.MulDivHalfEven(n, int64(core.MicrosPerUnit), unit)))
}

// GPUHours renders milli-GPU-seconds as GPU-hours, exactly to the
// millionth.
func GPUHours(ms int64) json.Number { return Scaled(ms, 3600*1000) }

// Pct renders num/den as a percentage with two decimals, half to even.
func Pct(num, den int64) json.Number {
	if den <= 0 {
		return "0"
	}
	return Scaled(core.MulDivHalfEven(num, 10000, den), 100)
}
