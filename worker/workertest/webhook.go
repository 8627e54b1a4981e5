package workertest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Webhook is an alert receiver: an http.Handler that answers 204 and counts
// the alerts it is sent by their "kind". The zero value is ready; serve it
// with httptest.NewServer and give the server's URL to
// ConfigOptions.WebhookURL.
type Webhook struct {
	mu     sync.Mutex
	kinds  map[string]int
	bodies []string
}

// ServeHTTP implements http.Handler.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(body, &m)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kinds == nil {
		w.kinds = map[string]int{}
	}
	w.kinds[m.Kind]++
	w.bodies = append(w.bodies, string(body))
	rw.WriteHeader(http.StatusNoContent)
}

// Count is how many alerts of kind arrived.
func (w *Webhook) Count(kind string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kinds[kind]
}

// All is every body received, one a line, for failure messages.
func (w *Webhook) All() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.bodies, "\n")
}
