package fakeprovider

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// A stored completion is what OpenAI keeps of a chat completion created
// with store: true: the completion and its metadata, listed by
// GET /v1/chat/completions?metadata[k]=v once the store has caught up
// (Scenario.StoreLag). The fake bills every call it receives whatever it
// stores; a look-up is free.
type storedCompletion struct {
	at       time.Time
	metadata map[string]string
	body     json.RawMessage // the chat.completion object as answered
}

// storeLocked keeps a billed OpenAI answer of a store: true call.
func (s *Server) storeLocked(c *call, a *answer, now time.Time) {
	if !c.store || a == nil {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(openAI{}.body(c, a), &obj); err != nil {
		return
	}
	md := map[string]string{}
	for k, v := range c.metadata {
		md[k] = v
	}
	obj["metadata"] = md
	obj["request_id"] = ""
	s.stored = append(s.stored, storedCompletion{at: now, metadata: md, body: marshal(obj, "")})
}

// serveStoredList answers GET /v1/chat/completions: the stored completions
// whose metadata hold every metadata[k]=v of the query and that the store
// shows by now, oldest first, in OpenAI's list shape.
func (s *Server) serveStoredList(w http.ResponseWriter, r *http.Request) {
	v := openAI{}
	s.mu.Lock()
	e := s.newErrInfoLocked(v, r)
	if rej := v.auth(r, s.sc.APIKey, e); rej != nil {
		s.mu.Unlock()
		writeReply(w, rej)
		return
	}
	want := map[string]string{}
	for k, vals := range r.URL.Query() {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(vals) > 0 {
			want[strings.TrimSuffix(name, "]")] = vals[0]
		}
	}
	now := s.sc.Now()
	data := []json.RawMessage{}
	for _, sc := range s.stored {
		if now.Before(sc.at.Add(time.Duration(s.sc.StoreLag))) {
			continue
		}
		match := true
		for k, val := range want {
			if sc.metadata[k] != val {
				match = false
				break
			}
		}
		if match {
			data = append(data, sc.body)
		}
	}
	s.stats.StoreLookups++
	s.broadcastLocked()
	s.mu.Unlock()
	out := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: data}
	if len(data) > 0 {
		first, last := idOf(data[0]), idOf(data[len(data)-1])
		out.FirstID, out.LastID = &first, &last
	}
	v.headers(w.Header(), e)
	writeJSON(w, http.StatusOK, out)
}

func idOf(b json.RawMessage) string {
	var x struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(b, &x)
	return x.ID
}
