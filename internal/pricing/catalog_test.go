package pricing

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpufleet/gpufleet/internal/core"
)

func smallCatalog() *Catalog {
	plan := func(m core.BillingMode, price core.Micros) core.PricePlan {
		p := core.PricePlan{Mode: m, Price: price, Per: core.Hour, Granularity: 1, MinCharge: 60}
		if m == core.Monthly {
			p.Per, p.Granularity, p.Term, p.MinCharge = core.Month, core.Month.Seconds(), core.Month.Seconds(), 0
		}
		return p
	}
	offer := func(id, model, region string, plans ...core.PricePlan) core.Offer {
		parts := strings.Split(id, "/")
		return core.Offer{ID: id, Provider: parts[0], Region: region, InstanceType: parts[2], GPUModel: model,
			GPUs: 8, GPUMemMiB: 40960, VCPUs: 96, MemoryMiB: 1152 * 1024, Currency: "USD", Plans: plans}
	}
	return &Catalog{
		Currency: "USD",
		Offers: []core.Offer{
			offer("aws/us-east-1/p4d.24xlarge", "NVIDIA A100", "us-east-1", plan(core.OnDemand, 21_957_642), plan(core.Monthly, 10_162_398_620)),
			offer("aws/us-east-1/p5.48xlarge", "NVIDIA H100", "us-east-1", plan(core.OnDemand, 55_040_000)),
			offer("aws/us-west-2/p4d.24xlarge", "NVIDIA A100", "us-west-2", plan(core.OnDemand, 21_957_642)),
			offer("idc/cd1/v100x8", "NVIDIA Tesla V100", "cd1", plan(core.Monthly, 2_000_000_000)),
		},
		Vouchers: []core.Voucher{{ID: "v", ShareBP: 3000, Cap: 500_000_000,
			ValidFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ValidTo: time.Date(2028, 1, 1, 0, 0, 0, 0, time.UTC),
			Providers: []string{"idc"}, Modes: []core.BillingMode{core.Monthly}}},
	}
}

func TestOffer(t *testing.T) {
	c := smallCatalog()
	o, err := c.Offer("aws/us-east-1/p5.48xlarge")
	if err != nil || o.GPUModel != "NVIDIA H100" {
		t.Fatalf("Offer = %v, %v", o, err)
	}
	o.GPUs = 4 // the pointer is into the catalog
	if c.Offers[1].GPUs != 4 {
		t.Error("Offer does not return a pointer into the catalog")
	}
	tests := []struct {
		id   string
		want []string
	}{
		{"aws/us-east-1/p4d.24xlarg", []string{`unknown offer "aws/us-east-1/p4d.24xlarg"`, "did you mean aws/us-east-1/p4d.24xlarge"}},
		{"AWS/US-EAST-1/P5.48XLARGE", []string{"did you mean aws/us-east-1/p5.48xlarge"}},
		{"p4d.24xlarge", []string{"did you mean", "aws/us-east-1/p4d.24xlarge", "aws/us-west-2/p4d.24xlarge"}},
		{"gcp/zzz", []string{`unknown offer "gcp/zzz"`, "the catalog has 4 offers"}},
	}
	for _, tt := range tests {
		_, err := c.Offer(tt.id)
		if !errors.Is(err, ErrUnknownOffer) {
			t.Errorf("Offer(%q) error %v, want ErrUnknownOffer", tt.id, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Offer(%q) error %q, want it to contain %q", tt.id, err, w)
			}
		}
	}
}

func TestFilter(t *testing.T) {
	c := smallCatalog()
	ids := func(os []core.Offer) string {
		var s []string
		for _, o := range os {
			s = append(s, o.ID)
		}
		return strings.Join(s, " ")
	}
	tests := []struct{ gpu, region, want string }{
		{"", "", "aws/us-east-1/p4d.24xlarge aws/us-east-1/p5.48xlarge aws/us-west-2/p4d.24xlarge idc/cd1/v100x8"},
		{"a100", "", "aws/us-east-1/p4d.24xlarge aws/us-west-2/p4d.24xlarge"},
		{"A100", "US-EAST-1", "aws/us-east-1/p4d.24xlarge"},
		{"", "us-east-1", "aws/us-east-1/p4d.24xlarge aws/us-east-1/p5.48xlarge"},
		{"v100", "", "idc/cd1/v100x8"},
		{"h200", "", ""},
		{"", "us-east", ""}, // regions match whole
	}
	for _, tt := range tests {
		if got := ids(c.Filter(tt.gpu, tt.region)); got != tt.want {
			t.Errorf("Filter(%q, %q) = %q, want %q", tt.gpu, tt.region, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	if err := smallCatalog().Validate(); err != nil {
		t.Fatalf("valid catalog: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(c *Catalog)
		field  string
	}{
		{"currency", func(c *Catalog) { c.Currency = "XYZ" }, "currency"},
		{"lower-case currency", func(c *Catalog) { c.Currency = "usd" }, "currency"},
		{"offer currency", func(c *Catalog) { c.Offers[0].Currency = "EUR" }, "offers[0].currency"},
		{"duplicate id", func(c *Catalog) { c.Offers[2].ID = c.Offers[0].ID }, "offers[2].id"},
		{"empty id", func(c *Catalog) { c.Offers[1].ID = "" }, "offers[1].id"},
		{"id with space", func(c *Catalog) { c.Offers[1].ID = "a b" }, "offers[1].id"},
		{"no provider", func(c *Catalog) { c.Offers[1].Provider = "" }, "offers[1].provider"},
		{"no gpu model", func(c *Catalog) { c.Offers[1].GPUModel = "" }, "offers[1].gpu_model"},
		{"control char", func(c *Catalog) { c.Offers[1].GPUModel = "A\x00" }, "offers[1].gpu_model"},
		{"zero gpus", func(c *Catalog) { c.Offers[0].GPUs = 0 }, "offers[0].gpus"},
		{"negative memory", func(c *Catalog) { c.Offers[0].GPUMemMiB = -1 }, "offers[0].gpu_memory_gib"},
		{"no plans", func(c *Catalog) { c.Offers[0].Plans = nil }, "offers[0].plans"},
		{"negative price", func(c *Catalog) { c.Offers[0].Plans[1].Price = -1 }, "offers[0].plans[1].price"},
		{"unknown mode", func(c *Catalog) { c.Offers[0].Plans[0].Mode = "yearly" }, "offers[0].plans[0].mode"},
		{"alias mode", func(c *Catalog) { c.Offers[0].Plans[0].Mode = "hourly" }, "offers[0].plans[0].mode"},
		{"two plans one mode", func(c *Catalog) { c.Offers[0].Plans[1] = c.Offers[0].Plans[0] }, "offers[0].plans[1].mode"},
		{"monthly without term", func(c *Catalog) { c.Offers[0].Plans[1].Term = 0 }, "offers[0].plans[1].term"},
		{"on-demand with term", func(c *Catalog) { c.Offers[0].Plans[0].Term = 3600 }, "offers[0].plans[0].term"},
		{"zero granularity", func(c *Catalog) { c.Offers[0].Plans[0].Granularity = 0 }, "offers[0].plans[0].granularity"},
		{"huge term", func(c *Catalog) { c.Offers[0].Plans[1].Term = 1 << 40 }, "offers[0].plans[1].term"},
		{"series on on-demand", func(c *Catalog) {
			c.Offers[0].Plans[0].Series = []core.PricePoint{{At: time.Unix(0, 0), Price: 1}}
		}, "offers[0].plans[0].mode"},
		{"early termination on on-demand", func(c *Catalog) {
			c.Offers[0].Plans[0].EarlyTermination = &core.EarlyTermination{Granularity: 1}
		}, "offers[0].plans[0].mode"},
		{"tou without windows", func(c *Catalog) {
			c.Offers[0].Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.UTC}
		}, "offers[0].plans[0].time_of_use.windows"},
		{"tou local zone", func(c *Catalog) {
			c.Offers[0].Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.Local, Windows: []core.Window{{Weekdays: []time.Weekday{1}, MultiplierBP: 1}}}
		}, "offers[0].plans[0].time_of_use.timezone"},
		{"tou fixed zone", func(c *Catalog) {
			c.Offers[0].Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.FixedZone("X+8", 8*3600), Windows: []core.Window{{Weekdays: []time.Weekday{1}, MultiplierBP: 1}}}
		}, "offers[0].plans[0].time_of_use.timezone"},
		{"tou bad weekday", func(c *Catalog) {
			c.Offers[0].Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: []time.Weekday{7}, MultiplierBP: 1}}}
		}, "offers[0].plans[0].time_of_use.windows[0].weekdays"},
		{"tou weekday twice", func(c *Catalog) {
			c.Offers[0].Plans[0].TimeOfUse = &core.TimeOfUse{Location: time.UTC, Windows: []core.Window{{Weekdays: []time.Weekday{1, 1}, MultiplierBP: 1}}}
		}, "offers[0].plans[0].time_of_use.windows[0].weekdays"},
		{"voucher duplicate id", func(c *Catalog) { c.Vouchers = append(c.Vouchers, c.Vouchers[0]) }, "vouchers[1].id"},
		{"voucher share", func(c *Catalog) { c.Vouchers[0].ShareBP = 10001 }, "vouchers[0].share"},
		{"voucher cap", func(c *Catalog) { c.Vouchers[0].Cap = 0 }, "vouchers[0].cap"},
		{"voucher dates", func(c *Catalog) { c.Vouchers[0].ValidTo = c.Vouchers[0].ValidFrom }, "vouchers[0].valid_to"},
		{"voucher provider", func(c *Catalog) { c.Vouchers[0].Providers = []string{"idk"} }, "vouchers[0].providers[0]"},
		{"voucher model", func(c *Catalog) { c.Vouchers[0].GPUModels = []string{"NVIDIA A100", "A100"} }, "vouchers[0].gpu_models[1]"},
		{"voucher mode", func(c *Catalog) { c.Vouchers[0].Modes = []core.BillingMode{"ondemand"} }, "vouchers[0].modes[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := smallCatalog()
			tt.mutate(c)
			err := c.Validate()
			var fe *core.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *core.FieldError", err)
			}
			if fe.Field != tt.field {
				t.Errorf("Validate: field %q, want %q (%v)", fe.Field, tt.field, err)
			}
		})
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "abc", 0}, {"abc", "abd", 1}, {"kitten", "sitting", 3}, {"a", "abcdef", 5}}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b, 100); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if got := editDistance("aaaaaaaa", "bbbbbbbb", 3); got != 3 {
		t.Errorf("editDistance stops at %d, want 3", got)
	}
}
