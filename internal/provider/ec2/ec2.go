// Package ec2 is a provider.Provider that rents AWS EC2 instances with
// aws-sdk-go-v2. Offers are the catalog's AWS offers (provider aws, the
// configured region, an instance type); a lease is one instance.
//
//   - Acquire runs the instance with the lease's client token as
//     RunInstances' ClientToken and tags gpufleet:lease, gpufleet:offer,
//     gpufleet:mode and gpufleet:cluster, so a retried or restarted
//     acquire finds the instance it made instead of making another. Its
//     user data (UserData) installs and starts the agent, which joins
//     with the lease's bootstrap. Spot leases are one-time spot
//     instances that terminate on interruption; every other mode is an
//     on-demand instance: a committed mode (daily, weekly, monthly) is
//     a billing arrangement (a Reserved Instance or Savings Plan bought
//     separately covers on-demand instances of its type), not a kind of
//     instance.
//   - List and Poll describe the instances tagged with the cluster: the
//     tags carry the lease, offer and mode, so a restarted server
//     reconciles by tag. pending is provisioning, running is ready (the
//     server's boot timeout handles an agent that never joins),
//     shutting-down or terminated is reclaimed after a spot
//     interruption (Server.SpotInstanceTermination), released when we
//     terminated it and failed otherwise; stopping or stopped is failed.
//   - Release terminates the instance; terminating a terminated one is
//     no error.
//
// EC2's API tells nothing of the two-minute spot interruption notice;
// the agent reads it from the instance's metadata (IMDSv2) and reports
// it to the server, which checkpoints the instance's jobs.
//
// InsufficientInstanceCapacity (and the other capacity errors) is
// provider.ErrCapacity. Credentials come from the SDK's default chain
// (environment, shared config, instance role). The real API could not
// be reached where this was written: the SDK code is tested against
// ec2fake, a local server of the Query API subset used here.
package ec2

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/gpufleet/gpufleet/internal/core"
	"github.com/gpufleet/gpufleet/internal/provider"
)

// The tags every instance carries.
const (
	TagLease   = "gpufleet:lease"
	TagOffer   = "gpufleet:offer"
	TagMode    = "gpufleet:mode"
	TagCluster = "gpufleet:cluster"
)

// State reason codes EC2 gives a shut down instance.
const (
	ReasonSpot = "Server.SpotInstanceTermination"
	ReasonUser = "Client.UserInitiatedShutdown"
)

// capacityCodes are the RunInstances errors that mean no machine now.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true,
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"InsufficientCapacity":                 true,
	"MaxSpotInstanceCountExceeded":         true,
	"SpotMaxPriceTooLow":                   true,
	"InstanceLimitExceeded":                true,
	"VcpuLimitExceeded":                    true,
	"InsufficientFreeAddressesInSubnet":    true,
}

// API is the part of the EC2 client the provider calls.
type API interface {
	RunInstances(ctx context.Context, in *ec2.RunInstancesInput, opts ...func(*ec2.Options)) (*ec2.RunInstancesOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

var _ API = (*ec2.Client)(nil)

// Provider rents EC2 instances.
type Provider struct {
	cfg Config
	api API

	mu sync.Mutex
	// known is each instance's state as the caller last saw it, so that
	// Poll reports each change once (as the exec provider does).
	known    map[string]provider.State
	released map[string]bool
	lastPoll time.Time
	seeded   bool
}

var _ provider.Provider = (*Provider)(nil)

// New loads the AWS configuration (the default credential chain, cfg's
// region) and returns the provider.
func New(ctx context.Context, cfg Config, optFns ...func(*awsconfig.LoadOptions) error) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("ec2 provider: %w", err)
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, append([]func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(cfg.Region)}, optFns...)...)
	if err != nil {
		return nil, fmt.Errorf("ec2 provider: aws config: %w", err)
	}
	client := ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.Retryer = retryer()
	})
	return NewWithAPI(cfg, client)
}

// retryer is the SDK's standard retryer that does not retry a capacity
// error: the control loop asks again at its next tick, and the engine
// may rent another offer meanwhile.
func retryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 3
		o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			var ae smithy.APIError
			if errors.As(err, &ae) && capacityCodes[ae.ErrorCode()] {
				return aws.FalseTernary
			}
			return aws.UnknownTernary
		})}, o.Retryables...)
	})
}

// NewWithAPI returns the provider over api (an ec2.Client, or a test's).
func NewWithAPI(cfg Config, api API) (*Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("ec2 provider: %w", err)
	}
	if cfg.Offer == nil {
		return nil, errors.New("ec2 provider: no catalog to look offers up in")
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.BinaryPath == "" {
		cfg.BinaryPath = DefaultBinaryPath
	}
	return &Provider{cfg: cfg, api: api, known: map[string]provider.State{}, released: map[string]bool{}}, nil
}

// Offers returns the ids of the offers of cat this provider can rent:
// AWS offers of its region with an instance type.
func (p *Provider) Offers(all []core.Offer) []string {
	var out []string
	for i := range all {
		if p.check(&all[i]) == nil {
			out = append(out, all[i].ID)
		}
	}
	return out
}

func (p *Provider) check(o *core.Offer) error {
	switch {
	case o.Provider != "aws":
		return &core.FieldError{Field: "offer.provider", Value: o.Provider, Allowed: "aws (the ec2 provider rents AWS offers only)"}
	case o.Region != p.cfg.Region:
		return &core.FieldError{Field: "offer.region", Value: o.Region, Allowed: "the provider's region " + p.cfg.Region}
	case o.InstanceType == "":
		return &core.FieldError{Field: "offer.instance_type", Value: "", Allowed: "an EC2 instance type"}
	case p.ami(o.ID) == "":
		return &core.FieldError{Field: "ami", Value: o.ID, Allowed: "an offer with an AMI in the config (ami: or default_ami:)"}
	}
	return nil
}

func (p *Provider) ami(offer string) string {
	if a := p.cfg.AMI[offer]; a != "" {
		return a
	}
	return p.cfg.DefaultAMI
}

func (p *Provider) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.Timeout)
}

// Acquire implements provider.Provider: with a client token seen before
// (by EC2, in this process or another) it returns that token's instance.
func (p *Provider) Acquire(ctx context.Context, req provider.AcquireRequest) (provider.Machine, error) {
	ctx, cancel := p.ctx(ctx)
	defer cancel()
	if req.ClientToken == "" || len(req.ClientToken) > 64 {
		return provider.Machine{}, fmt.Errorf("ec2 provider: acquire: %w", &core.FieldError{Field: "client_token", Value: req.ClientToken, Allowed: "1 to 64 characters (EC2's ClientToken)"})
	}
	o, ok := p.cfg.Offer(req.OfferID)
	if !ok {
		return provider.Machine{}, fmt.Errorf("ec2 provider: acquire: %w", &core.FieldError{Field: "offer", Value: req.OfferID, Allowed: "an offer of the catalog"})
	}
	if err := p.check(o); err != nil {
		return provider.Machine{}, fmt.Errorf("ec2 provider: acquire %s: %w", req.OfferID, err)
	}
	// An instance of the token already there is the answer: the user
	// data (a fresh join token after a restart) may differ from the
	// first call's, which EC2 would refuse as IdempotentParameterMismatch.
	if m, ok, err := p.byToken(ctx, req.ClientToken); err != nil || ok {
		return m, err
	}
	b := req.Bootstrap
	fallback := b.JoinToken == ""
	if fallback || b.ServerURL == "" {
		url, token, err := p.fallback()
		if err != nil {
			return provider.Machine{}, fmt.Errorf("ec2 provider: acquire %s: %w", req.ClientToken, err)
		}
		if fallback {
			b.JoinToken = token
		}
		if b.ServerURL == "" {
			b.ServerURL = url
		}
	}
	if b.LeaseID == "" {
		b.LeaseID = req.ClientToken
	}
	ud, err := UserData(Script{Bootstrap: b, OfferID: req.OfferID, BinaryPath: p.cfg.BinaryPath, Args: p.cfg.AgentArgs, AgentToken: fallback})
	if err != nil {
		return provider.Machine{}, fmt.Errorf("ec2 provider: acquire %s: %w", req.ClientToken, err)
	}
	in := &ec2.RunInstancesInput{
		ImageId: aws.String(p.ami(o.ID)), InstanceType: types.InstanceType(o.InstanceType),
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ClientToken: aws.String(req.ClientToken),
		UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(ud))),
		// IMDSv2 only: the agent reads the spot notice with a token.
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired, HttpEndpoint: types.InstanceMetadataEndpointStateEnabled},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{
			{Key: aws.String(TagLease), Value: aws.String(req.ClientToken)},
			{Key: aws.String(TagOffer), Value: aws.String(req.OfferID)},
			{Key: aws.String(TagMode), Value: aws.String(string(req.Mode))},
			{Key: aws.String(TagCluster), Value: aws.String(p.cfg.Cluster)},
			{Key: aws.String("Name"), Value: aws.String("gpufleet " + req.ClientToken)},
		}}},
	}
	if p.cfg.SubnetID != "" {
		in.SubnetId = aws.String(p.cfg.SubnetID)
	}
	if len(p.cfg.SecurityGroupIDs) > 0 {
		in.SecurityGroupIds = p.cfg.SecurityGroupIDs
	}
	if p.cfg.KeyName != "" {
		in.KeyName = aws.String(p.cfg.KeyName)
	}
	if ip := p.cfg.InstanceProfile; ip != "" {
		if strings.HasPrefix(ip, "arn:") {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(ip)}
		} else {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(ip)}
		}
	}
	if req.Mode == core.Spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{SpotInstanceType: types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate}}
	}
	out, err := p.api.RunInstances(ctx, in)
	if err != nil {
		var ae smithy.APIError
		switch {
		case errors.As(err, &ae) && capacityCodes[ae.ErrorCode()]:
			return provider.Machine{}, fmt.Errorf("ec2 provider: %s %s in %s: %s: %w", req.Mode, o.InstanceType, p.cfg.Region, ae.ErrorMessage(), provider.ErrCapacity)
		case errors.As(err, &ae) && ae.ErrorCode() == "IdempotentParameterMismatch":
			// Raced with another acquire of the token: its instance.
			if m, ok, err2 := p.byToken(ctx, req.ClientToken); err2 == nil && ok {
				return m, nil
			}
		}
		return provider.Machine{}, fmt.Errorf("ec2 provider: run instance for lease %s: %w", req.ClientToken, err)
	}
	if len(out.Instances) != 1 {
		return provider.Machine{}, fmt.Errorf("ec2 provider: run instance for lease %s: %d instances in the answer, want 1", req.ClientToken, len(out.Instances))
	}
	m := p.machine(&out.Instances[0])
	p.mu.Lock()
	p.known[m.ProviderID] = m.State
	p.mu.Unlock()
	return m, nil
}

// fallback is the bootstrap for a request that brings none: the
// config's server URL and agent token, or Config.Fallback's (asked once).
func (p *Provider) fallback() (string, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if (p.cfg.ServerURL == "" || p.cfg.AgentToken == "") && p.cfg.Fallback != nil {
		url, token, err := p.cfg.Fallback()
		if err != nil {
			return "", "", fmt.Errorf("the machine's agent token: %w", err)
		}
		if p.cfg.ServerURL == "" {
			p.cfg.ServerURL = url
		}
		if p.cfg.AgentToken == "" {
			p.cfg.AgentToken = token
		}
		p.cfg.Fallback = nil
	}
	return p.cfg.ServerURL, p.cfg.AgentToken, nil
}

// byToken finds the instance of a client token.
func (p *Provider) byToken(ctx context.Context, token string) (provider.Machine, bool, error) {
	ins, err := p.describe(ctx, types.Filter{Name: aws.String("client-token"), Values: []string{token}})
	if err != nil {
		return provider.Machine{}, false, fmt.Errorf("ec2 provider: find the instance of lease %s: %w", token, err)
	}
	for i := range ins {
		if st := ins[i].State; st != nil && st.Name == types.InstanceStateNameTerminated && stateReason(&ins[i]) == ReasonUser {
			continue // a released one: the token is spent (EC2 too answers it for a while)
		}
		m := p.machine(&ins[i])
		p.mu.Lock()
		p.known[m.ProviderID] = m.State
		p.mu.Unlock()
		return m, true, nil
	}
	return provider.Machine{}, false, nil
}

// describe lists the cluster's instances matching filters, every page.
func (p *Provider) describe(ctx context.Context, filters ...types.Filter) ([]types.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: append([]types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{p.cfg.Cluster}}}, filters...)}
	var out []types.Instance
	pages := ec2.NewDescribeInstancesPaginator(p.api, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}

func stateReason(in *types.Instance) string {
	if in.StateReason == nil || in.StateReason.Code == nil {
		return ""
	}
	return *in.StateReason.Code
}

func tag(in *types.Instance, key string) string {
	for _, t := range in.Tags {
		if aws.ToString(t.Key) == key {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

// machine maps an instance to a Machine (see the package doc).
func (p *Provider) machine(in *types.Instance) provider.Machine {
	m := provider.Machine{ProviderID: aws.ToString(in.InstanceId), ClientToken: tag(in, TagLease), OfferID: tag(in, TagOffer),
		Mode: core.BillingMode(tag(in, TagMode)), LaunchedAt: aws.ToTime(in.LaunchTime)}
	if m.ClientToken == "" {
		m.ClientToken = aws.ToString(in.ClientToken)
	}
	if m.Mode == "" {
		m.Mode = core.OnDemand
		if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
			m.Mode = core.Spot
		}
	}
	var name types.InstanceStateName
	if in.State != nil {
		name = in.State.Name
	}
	p.mu.Lock()
	released, seen := p.released[m.ProviderID], p.known[m.ProviderID] != ""
	p.mu.Unlock()
	switch name {
	case types.InstanceStateNamePending:
		m.State = provider.Provisioning
	case types.InstanceStateNameRunning:
		m.State = provider.Ready
		m.ReadyAt = m.LaunchedAt
	case types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated:
		switch reason := stateReason(in); {
		case released:
			m.State = provider.Released
		case reason == ReasonSpot:
			m.State = provider.Reclaimed
		case reason == ReasonUser && !seen:
			// Terminated by an API call (ours, before a restart) and
			// never shown to this process: it is gone, not failed.
			m.State = provider.Released
		default:
			m.State = provider.Failed
		}
	default: // stopping, stopped: not a machine we can use
		m.State = provider.Failed
	}
	return m
}

// Release implements provider.Provider by terminating the instance.
func (p *Provider) Release(ctx context.Context, providerID string) error {
	ctx, cancel := p.ctx(ctx)
	defer cancel()
	_, err := p.api.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{providerID}})
	var ae smithy.APIError
	if err != nil && !(errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound") {
		return fmt.Errorf("ec2 provider: terminate %s: %w", providerID, err)
	}
	p.mu.Lock()
	p.released[providerID] = true
	p.known[providerID] = provider.Released
	p.mu.Unlock()
	return nil
}

// List implements provider.Provider: the cluster's instances but the
// released ones, their client tokens from the gpufleet:lease tag.
func (p *Provider) List(ctx context.Context) ([]provider.Machine, error) {
	ms, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := ms[:0]
	for _, m := range ms {
		if m.State == provider.Released {
			continue
		}
		p.known[m.ProviderID] = m.State
		out = append(out, m)
	}
	return out, nil
}

func (p *Provider) list(ctx context.Context) ([]provider.Machine, error) {
	ctx, cancel := p.ctx(ctx)
	defer cancel()
	ins, err := p.describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("ec2 provider: describe instances: %w", err)
	}
	out := make([]provider.Machine, 0, len(ins))
	for i := range ins {
		out = append(out, p.machine(&ins[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderID < out[j].ProviderID })
	return out, nil
}

// Poll implements provider.Provider by describing the cluster's
// instances at most every PollInterval and reporting each whose state
// changed since the caller last saw it. A known instance that is no
// longer described (EC2 forgets terminated ones after about an hour) is
// reported failed. As in the exec provider, the first poll records the
// instances the caller was never shown without reporting them.
func (p *Provider) Poll(ctx context.Context, now time.Time) ([]provider.Event, error) {
	p.mu.Lock()
	due := p.lastPoll.IsZero() || now.Sub(p.lastPoll) >= p.cfg.PollInterval
	p.mu.Unlock()
	if !due {
		return nil, nil
	}
	ms, err := p.list(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastPoll = now
	var evs []provider.Event
	listed := map[string]bool{}
	for _, m := range ms {
		listed[m.ProviderID] = true
		old, ok := p.known[m.ProviderID]
		if ok && old == m.State {
			continue
		}
		if !ok && (!p.seeded || m.State == provider.Released) {
			p.known[m.ProviderID] = m.State
			continue
		}
		p.known[m.ProviderID] = m.State
		switch m.State {
		case provider.Provisioning, provider.Released:
			continue
		case provider.Reclaimed, provider.Failed:
			m.EndedAt = now
		case provider.Ready:
			m.ReadyAt = now // when we saw it running; LaunchTime is earlier
		}
		evs = append(evs, provider.Event{At: now, Machine: m})
	}
	for id, st := range p.known {
		if listed[id] || st == provider.Released || st == provider.Failed || st == provider.Reclaimed {
			continue
		}
		p.known[id] = provider.Failed
		evs = append(evs, provider.Event{At: now, Machine: provider.Machine{ProviderID: id, State: provider.Failed, EndedAt: now}})
	}
	p.seeded = true
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Machine.ProviderID < evs[j].Machine.ProviderID })
	return evs, nil
}
