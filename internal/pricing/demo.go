package pricing

import (
	_ "embed"
	"fmt"
)

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the embedded demo catalog (demo.yaml), in USD: real AWS
// us-east-1 list prices for A100, H100, A10G, T4 and V100 machines, and an
// illustrative IDC, idc-chengdu, with daily, weekly and monthly terms on
// V100 and A100 machines, an off-peak window (22:00–06:00 Asia/Shanghai at
// half price) and a voucher covering 30% of its cost up to 500 USD through
// 2027. Each call returns a fresh copy.
func Demo() *Catalog {
	c, err := ParseYAML("demo.yaml", demoYAML)
	if err != nil {
		// The file is embedded and tested: a failure is a build defect.
		panic(fmt.Sprintf("pricing: embedded demo catalog: %v", err))
	}
	return c
}
