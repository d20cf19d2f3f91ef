package core

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Micros is an amount of money in millionths of a currency unit. Ledgers,
// prices and budgets are Micros; floats never enter a bill.
type Micros int64

// MicrosPerUnit is the number of micro-units in one currency unit.
const MicrosPerUnit Micros = 1_000_000

// Currency is an ISO 4217 alphabetic code such as "USD".
type Currency string

// knownCurrencies is the set of ISO 4217 codes gpufleet accepts. It lists
// the currencies GPU rentals are priced in today; an unknown code is an
// error rather than a silent new currency.
var knownCurrencies = map[Currency]bool{
	"USD": true, "EUR": true, "CNY": true, "JPY": true, "GBP": true, "KRW": true,
	"INR": true, "SGD": true, "HKD": true, "TWD": true, "AUD": true, "CAD": true,
	"CHF": true, "SEK": true, "NOK": true, "DKK": true, "PLN": true, "BRL": true,
	"MXN": true, "AED": true, "SAR": true, "ILS": true, "ZAR": true, "IDR": true,
	"MYR": true, "THB": true, "VND": true, "PHP": true, "NZD": true, "TRY": true,
	"CZK": true, "HUF": true, "RUB": true,
}

// ParseCurrency validates an ISO 4217 code; lower case is accepted.
func ParseCurrency(s string) (Currency, error) {
	c := Currency(strings.ToUpper(strings.TrimSpace(s)))
	if !knownCurrencies[c] {
		return "", &FieldError{Field: "currency", Value: s, Allowed: "an ISO 4217 code such as USD, EUR, CNY"}
	}
	return c, nil
}

// Money is an amount with its currency, for display and exchange formats.
type Money struct {
	Amount   Micros   `json:"micros"`
	Currency Currency `json:"currency"`
}

// String formats m as "900.00 USD".
func (m Money) String() string { return m.Amount.String() + " " + string(m.Currency) }

// ParseMicros parses a decimal amount such as "21.958", "-3", "0.0000015".
// Digits beyond the sixth decimal are rounded half to even, so importing a
// price with more precision than the ledger keeps is deterministic.
func ParseMicros(s string) (Micros, error) {
	t := strings.TrimSpace(s)
	bad := func() (Micros, error) {
		return 0, &FieldError{Field: "amount", Value: s, Allowed: "a decimal number such as 12.5 (at most 9e12)"}
	}
	if t == "" {
		return bad()
	}
	neg := false
	switch t[0] {
	case '-':
		neg, t = true, t[1:]
	case '+':
		t = t[1:]
	}
	intPart, frac, hasDot := strings.Cut(t, ".")
	if intPart == "" && (!hasDot || frac == "") {
		return bad()
	}
	if intPart == "" {
		intPart = "0"
	}
	for _, part := range []string{intPart, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return bad()
			}
		}
	}
	if len(intPart) > 13 {
		return bad()
	}
	whole, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || whole > 9_000_000_000_000 {
		return bad()
	}
	var fr int64
	keep := frac
	if len(keep) > 6 {
		keep = frac[:6]
	}
	keep += strings.Repeat("0", 6-len(keep))
	fr, _ = strconv.ParseInt(keep, 10, 64)
	v := whole*int64(MicrosPerUnit) + fr
	if len(frac) > 6 {
		// Round the dropped digits half to even.
		rest := strings.TrimRight(frac[6:], "0")
		switch {
		case rest == "":
		case rest[0] > '5', rest[0] == '5' && len(rest) > 1:
			v++
		case rest[0] == '5' && v%2 == 1:
			v++
		}
	}
	if v > 9_000_000_000_000*int64(MicrosPerUnit) {
		return bad()
	}
	if neg {
		v = -v
	}
	return Micros(v), nil
}

// String formats m with at least two and at most six decimals: "900.00",
// "0.006099".
func (m Micros) String() string {
	v := int64(m)
	sign := ""
	u := uint64(v)
	if v < 0 {
		sign, u = "-", uint64(-v)
		if v == math.MinInt64 {
			u = uint64(math.MaxInt64) + 1
		}
	}
	whole, frac := u/1_000_000, u%1_000_000
	f := fmt.Sprintf("%06d", frac)
	f = strings.TrimRight(f, "0")
	for len(f) < 2 {
		f += "0"
	}
	return fmt.Sprintf("%s%d.%s", sign, whole, f)
}

// Decimal formats m as the shortest exact decimal: "900", "21.957642",
// "-3.5". JSON outputs use it so that a number is never a float's
// 899.9999.
func (m Micros) Decimal() string {
	s := m.String()
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Float returns m in currency units, for JSON outputs and charts only.
func (m Micros) Float() float64 { return float64(m) / float64(MicrosPerUnit) }

// RoundTo rounds m half to even to a multiple of unit (for example 10_000
// for cents), as invoice lines are rounded.
func (m Micros) RoundTo(unit Micros) Micros {
	if unit <= 1 {
		return m
	}
	return Micros(MulDivHalfEven(int64(m), 1, int64(unit))) * unit
}

// MulDivHalfEven returns a*b/c rounded half to even, computed in 128 bits so
// that a*b may exceed int64. It panics if c is zero or the quotient does not
// fit in int64: both are programming errors in a caller.
func MulDivHalfEven(a, b, c int64) int64 {
	if c == 0 {
		panic("core: MulDivHalfEven by zero")
	}
	neg := (a < 0) != (b < 0) != (c < 0)
	hi, lo := bits.Mul64(abs64(a), abs64(b))
	return DivHalfEven(U128{hi, lo}, abs64(c), neg)
}

func abs64(v int64) uint64 {
	if v < 0 {
		return uint64(-v) // -MinInt64 wraps to 1<<63, which is its magnitude.
	}
	return uint64(v)
}

// U128 is an unsigned 128-bit integer, used to accumulate exact products of
// prices, multipliers and seconds before one final rounding.
type U128 struct{ Hi, Lo uint64 }

// Add returns x+y; it panics on overflow.
func (x U128) Add(y U128) U128 {
	lo, c := bits.Add64(x.Lo, y.Lo, 0)
	hi, c2 := bits.Add64(x.Hi, y.Hi, c)
	if c2 != 0 {
		panic("core: U128 overflow")
	}
	return U128{hi, lo}
}

// Mul64 returns a*b as a U128.
func Mul64(a, b uint64) U128 {
	hi, lo := bits.Mul64(a, b)
	return U128{hi, lo}
}

// MulU64 returns x*m; it panics on overflow.
func (x U128) MulU64(m uint64) U128 {
	h1, l := bits.Mul64(x.Lo, m)
	h2h, h2 := bits.Mul64(x.Hi, m)
	hi, c := bits.Add64(h1, h2, 0)
	if h2h != 0 || c != 0 {
		panic("core: U128 overflow")
	}
	return U128{hi, l}
}

// Cmp compares x and y.
func (x U128) Cmp(y U128) int {
	switch {
	case x.Hi < y.Hi || x.Hi == y.Hi && x.Lo < y.Lo:
		return -1
	case x == y:
		return 0
	}
	return 1
}

// IsZero reports whether x is zero.
func (x U128) IsZero() bool { return x.Hi == 0 && x.Lo == 0 }

// Sub returns x-y; it panics if y > x.
func (x U128) Sub(y U128) U128 {
	lo, b := bits.Sub64(x.Lo, y.Lo, 0)
	hi, b2 := bits.Sub64(x.Hi, y.Hi, b)
	if b2 != 0 {
		panic("core: U128 underflow")
	}
	return U128{hi, lo}
}

// DivU128 returns x/y and x%y for y > 0, by binary long division. It is
// used only where a divisor itself needs 128 bits (allocation weights).
func (x U128) DivU128(y U128) (q, r U128) {
	if y.IsZero() {
		panic("core: U128 division by zero")
	}
	if y.Hi == 0 && x.Hi < y.Lo {
		qlo, rem := bits.Div64(x.Hi, x.Lo, y.Lo)
		return U128{0, qlo}, U128{0, rem}
	}
	for i := 127; i >= 0; i-- {
		r = U128{r.Hi<<1 | r.Lo>>63, r.Lo << 1}
		if i >= 64 {
			r.Lo |= (x.Hi >> (i - 64)) & 1
		} else {
			r.Lo |= (x.Lo >> i) & 1
		}
		if r.Cmp(y) >= 0 {
			r = r.Sub(y)
			if i >= 64 {
				q.Hi |= 1 << (i - 64)
			} else {
				q.Lo |= 1 << i
			}
		}
	}
	return q, r
}

// DivHalfEven returns n/d rounded half to even, negated when neg is set. It
// panics when the result does not fit in int64.
func DivHalfEven(n U128, d uint64, neg bool) int64 {
	if d == 0 {
		panic("core: division by zero")
	}
	if n.Hi >= d {
		panic("core: quotient overflows")
	}
	q, r := bits.Div64(n.Hi, n.Lo, d)
	// Compare 2r with d without overflow.
	switch {
	case r > d-r:
		q++
	case r == d-r && q%2 == 1:
		q++
	}
	if q > math.MaxInt64 {
		panic("core: quotient overflows int64")
	}
	if neg {
		return -int64(q)
	}
	return int64(q)
}
