package batchapi

import (
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// LineBytes is what a line adds to what is sent, so a submitter filling a
// batch up to Limits().MaxBytes measures what the vendor will count.
func TestLineBytesMeasuresWhatIsSent(t *testing.T) {
	t.Parallel()
	for _, vendor := range vendors {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			sent := make(chan []byte, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var data []byte
				if _, params, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err == nil && params["boundary"] != "" {
					mr := multipart.NewReader(r.Body, params["boundary"])
					for p, err := mr.NextPart(); err == nil; p, err = mr.NextPart() {
						if p.FormName() == "file" {
							data, _ = io.ReadAll(p)
							require.Equal(t, "application/jsonl", p.Header.Get("Content-Type"))
							require.Equal(t, "triage-batch-row-7.jsonl", p.FileName())
						} else {
							v, _ := io.ReadAll(p)
							require.Equal(t, "purpose", p.FormName())
							require.Equal(t, "batch", string(v))
						}
					}
				} else {
					data, _ = io.ReadAll(r.Body)
				}
				sent <- data
				http.Error(w, `{"error":{"message":"stop here","type":"invalid_request_error"}}`, http.StatusBadRequest)
			}))
			t.Cleanup(srv.Close)
			c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1", APIKey: testKey, HTTPClient: srv.Client()})
			require.NoError(t, err)
			lines := linesFor(t, vendor, recordIDs(5), nil)
			// A pretty-printed body is sent compacted: one JSONL line each.
			var pretty json.RawMessage
			pretty, err = json.MarshalIndent(json.RawMessage(lines[2].Body), "", "  ")
			require.NoError(t, err)
			lines[2].Body = pretty
			var sum int64
			for _, l := range lines {
				n, err := c.LineBytes(l)
				require.NoError(t, err)
				sum += n
			}
			if vendor == "openai" {
				_, err = c.Upload(ctxT(t), lines, "row-7")
			} else {
				_, err = c.Create(ctxT(t), "", lines, "row-7")
			}
			require.Error(t, err)
			data := <-sent
			if vendor == "openai" {
				require.EqualValues(t, sum, len(data))
				rows := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
				require.Len(t, rows, 5)
				for i, row := range rows {
					var ln struct {
						CustomID string          `json:"custom_id"`
						Method   string          `json:"method"`
						URL      string          `json:"url"`
						Body     json.RawMessage `json:"body"`
					}
					require.NoError(t, json.Unmarshal([]byte(row), &ln))
					require.Equal(t, lines[i].CustomID, ln.CustomID)
					require.Equal(t, "POST", ln.Method)
					require.Equal(t, "/v1/chat/completions", ln.URL)
					require.JSONEq(t, string(lines[i].Body), string(ln.Body))
				}
				return
			}
			require.EqualValues(t, sum-1+int64(len(`{"requests":[]}`)), len(data))
			var req struct {
				Requests []struct {
					CustomID string          `json:"custom_id"`
					Params   json.RawMessage `json:"params"`
				} `json:"requests"`
			}
			require.NoError(t, json.Unmarshal(data, &req))
			require.Len(t, req.Requests, 5)
			for i, r := range req.Requests {
				require.Equal(t, lines[i].CustomID, r.CustomID)
				require.JSONEq(t, string(lines[i].Body), string(r.Params))
			}
		})
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	for vendor, want := range map[string]Limits{
		"openai":    {MaxLines: 50000, MaxBytes: 200 << 20 * 9 / 10},
		"anthropic": {MaxLines: 100000, MaxBytes: 256 << 20 * 9 / 10},
	} {
		c, err := New(Options{Vendor: vendor, BaseURL: "http://127.0.0.1:1/v1", APIKey: testKey})
		require.NoError(t, err)
		require.Equal(t, want, c.Limits())
		lines := make([]Line, want.MaxLines+1)
		for i := range lines {
			lines[i] = Line{CustomID: "k" + strings.Repeat("x", i%7) + string(rune('a'+i%26)), Body: json.RawMessage(`{}`)}
		}
		_, err = c.encodeLines(lines)
		require.ErrorIs(t, err, ErrInvalidLines)
		require.Contains(t, err.Error(), "lines, at most")
	}
}
