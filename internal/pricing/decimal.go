package pricing

import (
	"errors"
	"math/big"
	"strconv"
	"strings"

	"github.com/gpufleet/gpufleet/internal/core"
)

// Exact decimal arithmetic for the values that are not money: basis points,
// GiB. Values are parsed from their text into big rationals, never through
// a float.

var errDecimal = errors.New("not a decimal number")

// parseDecimal parses an unsigned or signed decimal such as "0.5", "12",
// ".25", "3." exactly. Exponents, hex, underscores and fractions are
// rejected, as is text longer than 40 characters.
func parseDecimal(s string) (*big.Rat, error) {
	t := strings.TrimSpace(s)
	if t == "" || len(t) > 40 {
		return nil, errDecimal
	}
	neg := false
	switch t[0] {
	case '-':
		neg, t = true, t[1:]
	case '+':
		t = t[1:]
	}
	intPart, frac, _ := strings.Cut(t, ".")
	if intPart == "" && frac == "" {
		return nil, errDecimal
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return nil, errDecimal
			}
		}
	}
	n, ok := new(big.Int).SetString("0"+intPart+frac, 10)
	if !ok {
		return nil, errDecimal
	}
	if neg {
		n.Neg(n)
	}
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	return new(big.Rat).SetFrac(n, den), nil
}

// exactInt returns r*m if that is an integer that fits in int64.
func exactInt(r *big.Rat, m int64) (int64, bool) {
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt64(m))
	if !x.IsInt() || !x.Num().IsInt64() {
		return 0, false
	}
	return x.Num().Int64(), true
}

// parseFactorBP parses a multiplier or share written as a decimal factor
// ("0.5", "1.25") into basis points (5000, 12500), exactly.
func parseFactorBP(s string) (int64, bool) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, false
	}
	return exactInt(r, 10000)
}

// parsePercentBP parses a percentage such as "25%" or "12.5%" into basis
// points (2500, 1250), exactly. The % sign is required.
func parsePercentBP(s string) (int64, bool) {
	t, ok := strings.CutSuffix(strings.TrimSpace(s), "%")
	if !ok {
		return 0, false
	}
	r, err := parseDecimal(t)
	if err != nil {
		return 0, false
	}
	return exactInt(r, 100)
}

// parseShareBP parses a share written as a fraction ("0.3") or a
// percentage ("30%").
func parseShareBP(s string) (int64, bool) {
	if strings.HasSuffix(strings.TrimSpace(s), "%") {
		return parsePercentBP(s)
	}
	return parseFactorBP(s)
}

// parseGiBToMiB parses a size in GiB ("40", "30.5") into whole MiB.
func parseGiBToMiB(s string) (int64, bool) {
	r, err := parseDecimal(s)
	if err != nil || r.Sign() < 0 {
		return 0, false
	}
	return exactInt(r, 1024)
}

// formatScaled formats n/10^scale as a decimal with no trailing zeros.
func formatScaled(n int64, scale int) string {
	neg := n < 0
	u := new(big.Int).SetInt64(n)
	u.Abs(u)
	s := u.String()
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	whole, frac := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// formatFactorBP formats basis points as a factor: 5000 → "0.5".
func formatFactorBP(bp int64) string { return formatScaled(bp, 4) }

// formatPercentBP formats basis points as a percentage: 1250 → "12.5%".
func formatPercentBP(bp int64) string { return formatScaled(bp, 2) + "%" }

// formatMiBAsGiB formats MiB as exact GiB: 31232 → "30.5". A MiB is
// 1/1024 GiB = 0.0009765625 GiB, so ten decimals always suffice.
func formatMiBAsGiB(mib int64) string {
	x := new(big.Int).Mul(big.NewInt(mib), big.NewInt(9765625)) // mib * 10^10 / 1024
	neg := x.Sign() < 0
	x.Abs(x)
	s := x.String()
	if len(s) <= 10 {
		s = strings.Repeat("0", 11-len(s)) + s
	}
	whole, frac := s[:len(s)-10], strings.TrimRight(s[len(s)-10:], "0")
	out := whole
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// mulMicros returns the decimal s times m in micro-units, rounded half to
// even once at the end, so that an hourly rate times 730 is exact.
func mulMicros(s string, m int64) (core.Micros, bool) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, false
	}
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt64(m*int64(core.MicrosPerUnit)))
	// Round half to even.
	q, rem := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	twice := new(big.Int).Mul(new(big.Int).Abs(rem), big.NewInt(2))
	switch c := twice.Cmp(x.Denom()); {
	case c > 0, c == 0 && q.Bit(0) == 1:
		if x.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() || q.Int64() > 9_000_000_000_000*int64(core.MicrosPerUnit) || q.Int64() < -9_000_000_000_000*int64(core.MicrosPerUnit) {
		return 0, false
	}
	return core.Micros(q.Int64()), true
}

// Spans: lengths of time in whole seconds, written as the largest period
// that divides them ("1 month", "3 weeks", "90 seconds").

var spanUnits = []core.Period{core.Month, core.Week, core.Day, core.Hour, core.Minute, core.Second}

// formatSpan writes seconds so that core.ParseSpan reads them back.
func formatSpan(sec int64) string {
	if sec <= 0 {
		return strconv.FormatInt(sec, 10)
	}
	for _, p := range spanUnits {
		if sec%p.Seconds() != 0 {
			continue
		}
		n := sec / p.Seconds()
		if n >= 1<<31 {
			break
		}
		if n == 1 {
			return "1 " + string(p)
		}
		return strconv.FormatInt(n, 10) + " " + string(p) + "s"
	}
	return strconv.FormatInt(sec, 10)
}

// parseSpanOrZero is core.ParseSpan that also accepts "0" (none).
func parseSpanOrZero(s string) (int64, error) {
	if strings.TrimSpace(s) == "0" {
		return 0, nil
	}
	return core.ParseSpan(s)
}
