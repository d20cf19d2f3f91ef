// Package ec2fake is a local server answering the parts of AWS that the ec2
// provider and the agent's spot watcher use, so that their SDK code runs
// against a real HTTP server in tests: the EC2 Query API subset
// (RunInstances, DescribeInstances, TerminateInstances; XML answers in
// the 2016-11-15 format) and IMDSv2's token and spot/instance-action.
//
// It is written from AWS's API reference, not checked against AWS: the
// real API cannot be reached where gpufleet is built. What it holds to:
// a RunInstances with a client token seen before returns that token's
// instance and creates none (Runs counts the ones that did create);
// DescribeInstances filters by tag:KEY, client-token,
// instance-state-name and instance ids; TerminateInstances is
// idempotent. An instance is pending when run and running after one
// DescribeInstances showed it pending (a lookup by client token moves
// nothing); a terminated one shows shutting-down once, then terminated. Capacity(type, false) answers InsufficientInstanceCapacity, and
// Interrupt ends a spot instance as EC2 does after a spot interruption
// (StateReason Server.SpotInstanceTermination).
package ec2fake

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Instance is one instance the fake holds.
type Instance struct {
	ID           string
	ClientToken  string
	ImageID      string
	InstanceType string
	SubnetID     string
	KeyName      string
	Profile      string
	Groups       []string
	Spot         bool
	// SpotType and Interruption are the spot options asked for.
	SpotType, Interruption string
	// HTTPTokens is the IMDS token setting asked for (required: IMDSv2).
	HTTPTokens string
	Tags       map[string]string
	// UserData is the decoded user data.
	UserData   string
	State      string
	ReasonCode string
	LaunchTime time.Time
}

// EC2 is the fake EC2 endpoint. Its zero value is not usable: use New.
type EC2 struct {
	// URL is the endpoint: the provider's endpoint override.
	URL string
	srv *httptest.Server

	mu        sync.Mutex
	now       func() time.Time
	instances map[string]*Instance
	order     []string
	noCap     map[string]bool
	runs      int
	calls     map[string]int
	onRun     func(Instance)
	unsigned  int
}

// New starts a fake EC2 endpoint; Close stops it.
func New() *EC2 {
	f := &EC2{now: time.Now, instances: map[string]*Instance{}, noCap: map[string]bool{}, calls: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	f.URL = f.srv.URL
	return f
}

// Close stops the endpoint.
func (f *EC2) Close() { f.srv.Close() }

// OnRun is called, outside the fake's lock, with every instance a
// RunInstances creates: a test starts the instance's agent there, as
// cloud-init would.
func (f *EC2) OnRun(fn func(Instance)) {
	f.mu.Lock()
	f.onRun = fn
	f.mu.Unlock()
}

// Capacity sets whether instances of type can be had now; without
// capacity RunInstances answers InsufficientInstanceCapacity.
func (f *EC2) Capacity(instanceType string, ok bool) {
	f.mu.Lock()
	f.noCap[instanceType] = !ok
	f.mu.Unlock()
}

// Runs is how many RunInstances calls created an instance.
func (f *EC2) Runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

// Calls is how many requests of action the fake answered.
func (f *EC2) Calls(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

// Unsigned is how many requests came without a SigV4 Authorization
// header.
func (f *EC2) Unsigned() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unsigned
}

// Instances returns a copy of every instance, in launch order.
func (f *EC2) Instances() []Instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Instance, 0, len(f.order))
	for _, id := range f.order {
		out = append(out, *f.instances[id])
	}
	return out
}

// Instance returns one instance.
func (f *EC2) Instance(id string) (Instance, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.instances[id]
	if !ok {
		return Instance{}, false
	}
	return *in, true
}

// Interrupt ends spot instance id as a spot interruption does: shutting
// down now, terminated at the next describe, with the state reason
// Server.SpotInstanceTermination.
func (f *EC2) Interrupt(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.instances[id]
	if !ok || !in.Spot {
		return fmt.Errorf("ec2fake: %s is no spot instance", id)
	}
	in.State, in.ReasonCode = "shutting-down", "Server.SpotInstanceTermination"
	return nil
}

// SetState forces an instance's state and state reason code.
func (f *EC2) SetState(id, state, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in, ok := f.instances[id]; ok {
		in.State, in.ReasonCode = state, reason
	}
}

func (f *EC2) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "MalformedQueryString", err.Error())
		return
	}
	action := r.Form.Get("Action")
	var hook func(Instance)
	var created []Instance
	f.mu.Lock()
	f.calls[action]++
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		f.unsigned++
	}
	var status int
	var body any
	switch {
	case r.Form.Get("Version") != "2016-11-15":
		status, body = http.StatusBadRequest, apiError("InvalidParameterValue", "Version "+r.Form.Get("Version")+" is not 2016-11-15")
	case action == "RunInstances":
		status, body, created = f.run(r.Form)
		hook = f.onRun
	case action == "DescribeInstances":
		status, body = f.describe(r.Form)
	case action == "TerminateInstances":
		status, body = f.terminate(r.Form)
	default:
		status, body = http.StatusBadRequest, apiError("InvalidAction", "The action "+action+" is not valid for this web service.")
	}
	f.mu.Unlock()
	if e, ok := body.(*errorResponse); ok {
		writeError(w, status, e.Errors[0].Code, e.Errors[0].Message)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(body)
	if hook != nil {
		for _, in := range created {
			hook(in)
		}
	}
}

const ns = "http://ec2.amazonaws.com/doc/2016-11-15/"

func (f *EC2) run(q map[string][]string) (int, any, []Instance) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if get("MinCount") != "1" || get("MaxCount") != "1" {
		return http.StatusBadRequest, apiError("InvalidParameterValue", "the fake runs one instance at a time (MinCount=MaxCount=1)"), nil
	}
	if get("ImageId") == "" || get("InstanceType") == "" {
		return http.StatusBadRequest, apiError("MissingParameter", "ImageId and InstanceType are required"), nil
	}
	tok := get("ClientToken")
	if tok != "" {
		for _, id := range f.order {
			in := f.instances[id]
			if in.ClientToken != tok {
				continue
			}
			if in.ImageID != get("ImageId") || in.InstanceType != get("InstanceType") {
				return http.StatusBadRequest, apiError("IdempotentParameterMismatch", "client token "+tok+" was used with other parameters"), nil
			}
			return http.StatusOK, runResponse(in), nil
		}
	}
	if f.noCap[get("InstanceType")] {
		return http.StatusInternalServerError, apiError("InsufficientInstanceCapacity",
			"We currently do not have sufficient "+get("InstanceType")+" capacity in the Availability Zone you requested."), nil
	}
	in := &Instance{ID: fmt.Sprintf("i-%017x", len(f.order)+1), ClientToken: tok, ImageID: get("ImageId"), InstanceType: get("InstanceType"),
		SubnetID: get("SubnetId"), KeyName: get("KeyName"), Profile: get("IamInstanceProfile.Name") + get("IamInstanceProfile.Arn"),
		HTTPTokens: get("MetadataOptions.HttpTokens"),
		Tags:       map[string]string{}, State: "pending", LaunchTime: f.now().UTC().Truncate(time.Second)}
	for i := 1; get("SecurityGroupId."+strconv.Itoa(i)) != ""; i++ {
		in.Groups = append(in.Groups, get("SecurityGroupId."+strconv.Itoa(i)))
	}
	if ud := get("UserData"); ud != "" {
		b, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return http.StatusBadRequest, apiError("InvalidParameterValue", "Invalid BASE64 encoding of user data."), nil
		}
		in.UserData = string(b)
	}
	if get("InstanceMarketOptions.MarketType") == "spot" {
		in.Spot = true
		in.SpotType = get("InstanceMarketOptions.SpotOptions.SpotInstanceType")
		in.Interruption = get("InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior")
	}
	for i := 1; get("TagSpecification."+strconv.Itoa(i)+".ResourceType") != ""; i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		if get(p+".ResourceType") != "instance" {
			continue
		}
		for j := 1; get(p+".Tag."+strconv.Itoa(j)+".Key") != ""; j++ {
			t := p + ".Tag." + strconv.Itoa(j)
			in.Tags[get(t+".Key")] = get(t + ".Value")
		}
	}
	f.instances[in.ID] = in
	f.order = append(f.order, in.ID)
	f.runs++
	return http.StatusOK, runResponse(in), []Instance{*in}
}

func (f *EC2) describe(q map[string][]string) (int, any) {
	ids := map[string]bool{}
	for i := 1; ; i++ {
		v := q["InstanceId."+strconv.Itoa(i)]
		if len(v) == 0 {
			break
		}
		ids[v[0]] = true
	}
	type filter struct {
		name   string
		values map[string]bool
	}
	var filters []filter
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name := q[p+".Name"]
		if len(name) == 0 {
			break
		}
		fl := filter{name: name[0], values: map[string]bool{}}
		for j := 1; ; j++ {
			v := q[p+".Value."+strconv.Itoa(j)]
			if len(v) == 0 {
				break
			}
			fl.values[v[0]] = true
		}
		filters = append(filters, fl)
	}
	for id := range ids {
		if f.instances[id] == nil {
			return http.StatusBadRequest, apiError("InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
		}
	}
	resp := describeResponse{NS: ns, RequestID: "req-describe"}
	byToken := false
	for _, fl := range filters {
		byToken = byToken || fl.name == "client-token"
	}
	for _, id := range f.order {
		in := f.instances[id]
		if len(ids) > 0 && !ids[id] {
			continue
		}
		ok := true
		for _, fl := range filters {
			var v string
			switch {
			case strings.HasPrefix(fl.name, "tag:"):
				t, has := in.Tags[strings.TrimPrefix(fl.name, "tag:")]
				if !has {
					ok = false
				}
				v = t
			case fl.name == "client-token":
				v = in.ClientToken
			case fl.name == "instance-state-name":
				v = in.State
			case fl.name == "instance-type":
				v = in.InstanceType
			default:
				return http.StatusBadRequest, apiError("InvalidParameterValue", "The filter '"+fl.name+"' is not known to the fake")
			}
			if !fl.values[v] {
				ok = false
			}
		}
		if ok {
			resp.Reservations = append(resp.Reservations, reservation{ID: "r-" + in.ID[2:], Owner: "123456789012", Instances: []instanceXML{toXML(in)}})
			if !byToken {
				advance(in)
			}
		}
	}
	return http.StatusOK, resp
}

// advance moves an instance along its life after a describe showed it:
// pending → running, shutting-down → terminated. A lookup by client
// token (an acquire's) moves nothing.
func advance(in *Instance) {
	switch in.State {
	case "pending":
		in.State = "running"
	case "shutting-down":
		in.State = "terminated"
	}
}

func (f *EC2) terminate(q map[string][]string) (int, any) {
	resp := terminateResponse{NS: ns, RequestID: "req-terminate"}
	var ids []string
	for i := 1; ; i++ {
		v := q["InstanceId."+strconv.Itoa(i)]
		if len(v) == 0 {
			break
		}
		ids = append(ids, v[0])
	}
	if len(ids) == 0 {
		return http.StatusBadRequest, apiError("MissingParameter", "The request must contain the parameter InstanceId")
	}
	sort.Strings(ids)
	for _, id := range ids {
		if f.instances[id] == nil {
			return http.StatusBadRequest, apiError("InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
		}
	}
	for _, id := range ids {
		in := f.instances[id]
		prev := stateXML(in.State)
		if in.State != "terminated" && in.State != "shutting-down" {
			in.State, in.ReasonCode = "shutting-down", "Client.UserInitiatedShutdown"
		}
		resp.Instances = append(resp.Instances, stateChange{ID: id, Current: stateXML(in.State), Previous: prev})
	}
	return http.StatusOK, resp
}

// The XML answers.

type errorResponse struct {
	XMLName   xml.Name   `xml:"Response"`
	Errors    []apiErrEl `xml:"Errors>Error"`
	RequestID string     `xml:"RequestID"`
}

type apiErrEl struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func apiError(code, msg string) *errorResponse {
	return &errorResponse{Errors: []apiErrEl{{Code: code, Message: msg}}, RequestID: "req-error"}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(apiError(code, msg))
}

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type state struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

func stateXML(name string) state {
	codes := map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}
	return state{Code: codes[name], Name: name}
}

type reasonXML struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type instanceXML struct {
	ID           string     `xml:"instanceId"`
	ImageID      string     `xml:"imageId"`
	State        state      `xml:"instanceState"`
	Type         string     `xml:"instanceType"`
	LaunchTime   string     `xml:"launchTime"`
	SubnetID     string     `xml:"subnetId,omitempty"`
	KeyName      string     `xml:"keyName,omitempty"`
	Lifecycle    string     `xml:"instanceLifecycle,omitempty"`
	ClientToken  string     `xml:"clientToken,omitempty"`
	Transition   string     `xml:"reason,omitempty"`
	StateReason  *reasonXML `xml:"stateReason,omitempty"`
	Tags         []tagXML   `xml:"tagSet>item"`
	PrivateDNS   string     `xml:"privateDnsName"`
	Architecture string     `xml:"architecture"`
}

func toXML(in *Instance) instanceXML {
	x := instanceXML{ID: in.ID, ImageID: in.ImageID, State: stateXML(in.State), Type: in.InstanceType,
		LaunchTime: in.LaunchTime.Format("2006-01-02T15:04:05.000Z"), SubnetID: in.SubnetID, KeyName: in.KeyName,
		ClientToken: in.ClientToken, PrivateDNS: "ip-10-0-0-" + strconv.Itoa(len(in.ID)) + ".ec2.internal", Architecture: "x86_64"}
	if in.Spot {
		x.Lifecycle = "spot"
	}
	if in.ReasonCode != "" {
		msgs := map[string]string{
			"Client.UserInitiatedShutdown":   "Client.UserInitiatedShutdown: User initiated shutdown",
			"Server.SpotInstanceTermination": "Server.SpotInstanceTermination: Spot instance termination",
		}
		x.StateReason = &reasonXML{Code: in.ReasonCode, Message: msgs[in.ReasonCode]}
	}
	keys := make([]string, 0, len(in.Tags))
	for k := range in.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		x.Tags = append(x.Tags, tagXML{Key: k, Value: in.Tags[k]})
	}
	return x
}

type runXML struct {
	XMLName       xml.Name      `xml:"RunInstancesResponse"`
	NS            string        `xml:"xmlns,attr"`
	RequestID     string        `xml:"requestId"`
	ReservationID string        `xml:"reservationId"`
	Owner         string        `xml:"ownerId"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

func runResponse(in *Instance) runXML {
	return runXML{NS: ns, RequestID: "req-run", ReservationID: "r-" + in.ID[2:], Owner: "123456789012", Instances: []instanceXML{toXML(in)}}
}

type reservation struct {
	ID        string        `xml:"reservationId"`
	Owner     string        `xml:"ownerId"`
	Instances []instanceXML `xml:"instancesSet>item"`
}

type describeResponse struct {
	XMLName      xml.Name      `xml:"DescribeInstancesResponse"`
	NS           string        `xml:"xmlns,attr"`
	RequestID    string        `xml:"requestId"`
	Reservations []reservation `xml:"reservationSet>item"`
}

type stateChange struct {
	ID       string `xml:"instanceId"`
	Current  state  `xml:"currentState"`
	Previous state  `xml:"previousState"`
}

type terminateResponse struct {
	XMLName   xml.Name      `xml:"TerminateInstancesResponse"`
	NS        string        `xml:"xmlns,attr"`
	RequestID string        `xml:"requestId"`
	Instances []stateChange `xml:"instancesSet>item"`
}
