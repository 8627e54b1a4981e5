package provider

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

// RequestBody and DecodeResponse are the halves of Do that a Batch API line
// reuses; a line must be sent and read exactly as the synchronous call.
func TestRequestBodyAndDecodeResponseMatchDo(t *testing.T) {
	t.Parallel()
	answers := map[string]map[int]string{
		"openai": {
			200: `{"choices":[{"message":{"content":"{\"a\":1}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
			400: `{"error":{"message":"bad","type":"invalid_request_error","code":"context_length_exceeded"}}`,
		},
		"anthropic": {
			200: `{"type":"message","content":[{"type":"text","text":"{\"a\":1}"}],"stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":3}}`,
			529: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		},
	}
	for vendor, byStatus := range answers {
		for status, answer := range byStatus {
			t.Run(vendor+"/"+http.StatusText(status), func(t *testing.T) {
				t.Parallel()
				sent := make(chan []byte, 1)
				b := setup(t, vendor, 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					sent <- body
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					_, _ = io.WriteString(w, answer)
				})
				req := baseRequest()
				res, err := b.client.Do(context.Background(), req)
				require.NoError(t, err)

				body, err := b.client.Body(req)
				require.NoError(t, err)
				require.Equal(t, string(<-sent), string(body))
				again, err := RequestBody(b.client.Format(), req)
				require.NoError(t, err)
				require.Equal(t, body, again)

				got := DecodeResponse(b.client.Format(), vendor, classify.PathDirect, res.Observation.Status,
					res.Observation.Headers, []byte(res.Observation.Body))
				res.Elapsed = 0
				require.Equal(t, res, got)
				if status == 200 {
					require.Equal(t, `{"a":1}`, got.Content)
					require.Equal(t, 3, got.OutputTokens)
				}
			})
		}
	}
}

func TestRequestBodyRefusesInvalidRequests(t *testing.T) {
	t.Parallel()
	_, err := RequestBody(FormatOpenAI, Request{Model: "m"})
	require.ErrorIs(t, err, ErrInvalidRequest)
	_, err = RequestBody("gemini", baseRequest())
	require.ErrorIs(t, err, ErrInvalidRequest)
}

func TestDecodeResponseMalformed2xx(t *testing.T) {
	t.Parallel()
	got := DecodeResponse(FormatAnthropic, "anthropic", "", 200, nil, []byte("<html>"))
	require.Equal(t, "2xx body is not JSON", got.Malformed)
	require.Equal(t, classify.PathDirect, got.Observation.Path)
	require.Equal(t, classify.PhaseResponse, got.Observation.Phase)
	require.Equal(t, "<html>", got.Observation.Body)
}

// ReadAll is readAll, for its test.
var ReadAll = readAll
