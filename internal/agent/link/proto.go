package link

import "time"

// The request and reply bodies of the agent protocol's HTTP routes
// (/api/v1/agent/…) beyond Heartbeat, Record and Command. Both sides use
// these types, the agent's HTTP uplink and the server's handlers, so the
// wire format is written once.

// HeartbeatReply answers a heartbeat: the lease the server has the
// machine on ("" while not leased) and the agent's state.
type HeartbeatReply struct {
	Agent  string `json:"agent"`
	Lease  string `json:"lease,omitempty"`
	State  string `json:"state"`
	Joined bool   `json:"joined"`
	// Token, in the reply to a join with a lease's join token, is the
	// agent's own credential: the agent sends it instead of the join
	// token from then on (the join token joins once).
	Token string `json:"token,omitempty"`
}

// RecordBatch is the body of the samples and events routes.
type RecordBatch struct {
	Agent string `json:"agent"`
	// Epoch names the agent's outbox incarnation; a new one restarts
	// the sequence numbers.
	Epoch   string   `json:"epoch"`
	Records []Record `json:"records"`
}

// BatchReply acknowledges a batch: every record up to Applied is had.
type BatchReply struct {
	Applied    int64 `json:"applied"`
	New        int   `json:"new"`
	Duplicates int   `json:"duplicates"`
}

// CommandsReply lists an agent's pending commands.
type CommandsReply struct {
	Commands []Command `json:"commands"`
}

// AckRequest acknowledges a command.
type AckRequest struct {
	Agent  string `json:"agent"`
	Result string `json:"result"`
}

// LogChunk is a piece of a run's output: Data starts at byte Offset of
// the run's log.
type LogChunk struct {
	Agent  string    `json:"agent"`
	Run    string    `json:"run"`
	Offset int64     `json:"offset"`
	Data   []byte    `json:"data"`
	At     time.Time `json:"at,omitzero"`
}

// LogChunkReply says how much of the run's log the server has.
type LogChunkReply struct {
	End int64 `json:"end"`
}

// LogEndHeader carries, on a 409 for a log chunk, how many bytes of the
// run's log the server has: where the agent resumes.
const LogEndHeader = "X-Gpufleet-Log-End"
