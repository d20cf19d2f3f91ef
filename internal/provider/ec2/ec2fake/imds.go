package ec2fake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"
)

// IMDS is a fake of one instance's metadata service, IMDSv2 only: PUT
// /latest/api/token (with X-aws-ec2-metadata-token-ttl-seconds) gives a
// token, and GET /latest/meta-data/spot/instance-action with it answers
// the interruption notice as JSON, or 404 while there is none. A GET
// without a good token is a 401, as on an instance that requires IMDSv2.
type IMDS struct {
	URL string
	srv *httptest.Server

	mu     sync.Mutex
	action string
	at     time.Time
	tokens int
	gets   int
}

// NewIMDS starts a fake metadata service; Close stops it.
func NewIMDS() *IMDS {
	m := &IMDS{}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	m.URL = m.srv.URL
	return m
}

// Close stops the service.
func (m *IMDS) Close() { m.srv.Close() }

// Notice posts an interruption notice: action (terminate, stop or
// hibernate) at time at.
func (m *IMDS) Notice(action string, at time.Time) {
	m.mu.Lock()
	m.action, m.at = action, at
	m.mu.Unlock()
}

// Gets is how many instance-action reads the service answered.
func (m *IMDS) Gets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

const fakeToken = "fake-imds-token"

func (m *IMDS) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "bad ttl", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.tokens++
		m.mu.Unlock()
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(ttl))
		_, _ = w.Write([]byte(fakeToken))
	case r.Method == http.MethodGet && r.URL.Path == "/latest/meta-data/spot/instance-action":
		if r.Header.Get("X-aws-ec2-metadata-token") != fakeToken {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		m.mu.Lock()
		m.gets++
		action, at := m.action, m.at
		m.mu.Unlock()
		if action == "" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"action": action, "time": at.UTC().Format("2006-01-02T15:04:05Z")})
	default:
		http.NotFound(w, r)
	}
}
