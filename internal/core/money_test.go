package core

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func TestParseMicros(t *testing.T) {
	tests := []struct {
		in   string
		want Micros
		ok   bool
	}{
		{"900", 900_000_000, true},
		{"21.958", 21_958_000, true},
		{"-3.5", -3_500_000, true},
		{"+0.000001", 1, true},
		{".5", 500_000, true},
		{"6.957139", 6_957_139, true},
		{"0.0000005", 0, true},  // half to even: down to 0
		{"0.0000015", 2, true},  // half to even: up to 2
		{"0.00000051", 1, true}, // above half
		{"0.0000025", 2, true},  // half to even: stays 2
		{"1.00000049999", 1_000_000, true},
		{" 12.5 ", 12_500_000, true},
		{"", 0, false},
		{"-", 0, false},
		{".", 0, false},
		{"1e3", 0, false},
		{"1,5", 0, false},
		{"abc", 0, false},
		{"1.2.3", 0, false},
		{"99999999999999", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseMicros(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMicros(%q) = %d, %v; want %d, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestMicrosString(t *testing.T) {
	for m, want := range map[Micros]string{
		900_000_000: "900.00", 21_958_000: "21.958", 1: "0.000001", -3_500_000: "-3.50", 0: "0.00",
		math.MinInt64: "-9223372036854.775808",
	} {
		if got := m.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int64(m), got, want)
		}
	}
	if got := (Money{Amount: 900_000_000, Currency: "CNY"}).String(); got != "900.00 CNY" {
		t.Errorf("Money.String() = %q", got)
	}
}

func TestRoundTo(t *testing.T) {
	cent := Micros(10_000)
	for in, want := range map[Micros]Micros{5_000: 0, 15_000: 20_000, 25_000: 20_000, 25_001: 30_000, -15_000: -20_000, 1_234_567: 1_230_000} {
		if got := in.RoundTo(cent); got != want {
			t.Errorf("%d.RoundTo(cent) = %d, want %d", int64(in), got, want)
		}
	}
}

func TestParseCurrency(t *testing.T) {
	if c, err := ParseCurrency("usd"); err != nil || c != "USD" {
		t.Errorf("ParseCurrency(usd) = %q, %v", c, err)
	}
	if _, err := ParseCurrency("XYZ"); err == nil {
		t.Error("unknown currency accepted")
	}
}

// halfEven is the reference: a*b/c rounded half to even with big.Rat.
func halfEven(a, b, c int64) *big.Int {
	r := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(a), big.NewInt(b)), big.NewInt(c))
	num, den := new(big.Int).Abs(r.Num()), r.Denom()
	q, rem := new(big.Int).QuoRem(num, den, new(big.Int))
	twice := new(big.Int).Lsh(rem, 1)
	if cmp := twice.Cmp(den); cmp > 0 || cmp == 0 && q.Bit(0) == 1 {
		q.Add(q, big.NewInt(1))
	}
	if r.Sign() < 0 {
		q.Neg(q)
	}
	return q
}

func TestPropertyMulDivHalfEven(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "a")
		b := rapid.Int64Range(-1<<40, 1<<40).Draw(t, "b")
		c := rapid.Int64Range(1, 1<<40).Draw(t, "c")
		if rapid.Bool().Draw(t, "negc") {
			c = -c
		}
		want := halfEven(a, b, c)
		if !want.IsInt64() {
			t.Skip("out of range")
		}
		if got := MulDivHalfEven(a, b, c); got != want.Int64() {
			t.Fatalf("MulDivHalfEven(%d,%d,%d) = %d, want %s", a, b, c, got, want)
		}
	})
}

func TestPropertyParseFormatRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := Micros(rapid.Int64Range(-9e18, 9e18).Draw(t, "m"))
		got, err := ParseMicros(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseMicros(%q) = %d, %v; want %d", m.String(), got, err, m)
		}
	})
}

func TestU128Div(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := U128{rapid.Uint64().Draw(t, "xh"), rapid.Uint64().Draw(t, "xl")}
		y := U128{rapid.Uint64Max(1<<20).Draw(t, "yh"), rapid.Uint64().Draw(t, "yl")}
		if y.IsZero() {
			y.Lo = 1
		}
		q, r := x.DivU128(y)
		toBig := func(v U128) *big.Int {
			b := new(big.Int).Lsh(new(big.Int).SetUint64(v.Hi), 64)
			return b.Or(b, new(big.Int).SetUint64(v.Lo))
		}
		wq, wr := new(big.Int).QuoRem(toBig(x), toBig(y), new(big.Int))
		if toBig(q).Cmp(wq) != 0 || toBig(r).Cmp(wr) != 0 {
			t.Fatalf("%v / %v = %v r %v, want %s r %s", x, y, q, r, wq, wr)
		}
	})
}

func FuzzParseMicros(f *testing.F) {
	for _, s := range []string{"900", "21.958", "-0.0000015", ".5", "1e3", "", "+", "9000000000000.999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMicros(s)
		if err != nil {
			return
		}
		back, err := ParseMicros(m.String())
		if err != nil || back != m {
			t.Fatalf("%q parsed to %d, which formats to %q and parses to %d, %v", s, m, m.String(), back, err)
		}
	})
}
