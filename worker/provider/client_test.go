package provider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
)

const testKey = "sk-test-0123456789-SECRET"

type testBundle struct {
	srv    *httptest.Server
	client *Client
}

// setup serves h and returns a client of the given vendor pointed at it.
func setup(t *testing.T, vendor string, timeout time.Duration, h http.HandlerFunc) *testBundle {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(Options{Vendor: vendor, BaseURL: srv.URL + "/v1/", APIKey: testKey, Timeout: timeout})
	require.NoError(t, err)
	return &testBundle{srv: srv, client: c}
}

func baseRequest() Request {
	temp := 0.3
	r := Request{
		Model: "gpt-4o-mini", System: "Answer with one JSON object.", Prompt: `Record: {"id":"r1"}`,
		MaxTokens: 256, Temperature: &temp, JSON: true, RecordID: "r1",
	}
	r.IdempotencyKey = IdempotencyKey("b1", r.RecordID, "enrich", RequestHash(r))
	return r
}

func TestOpenAISuccess(t *testing.T) {
	t.Parallel()
	req := baseRequest()
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodPost, r.Method)
		require.Equal(t, "/v1/chat/completions", r.URL.Path)
		require.Equal(t, "Bearer "+testKey, r.Header.Get("Authorization"))
		require.Empty(t, r.Header.Get("x-api-key"))
		require.Equal(t, req.IdempotencyKey, r.Header.Get("Idempotency-Key"))
		require.Equal(t, "r1", r.Header.Get("X-Triage-Record"))
		require.Equal(t, "application/json", r.Header.Get("Content-Type"))
		var body map[string]any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		require.Equal(t, "gpt-4o-mini", body["model"])
		require.EqualValues(t, 256, body["max_tokens"])
		require.EqualValues(t, 0.3, body["temperature"])
		require.Equal(t, map[string]any{"type": "json_object"}, body["response_format"])
		require.Equal(t, []any{
			map[string]any{"role": "system", "content": "Answer with one JSON object."},
			map[string]any{"role": "user", "content": `Record: {"id":"r1"}`},
		}, body["messages"])
		require.NotContains(t, body, "stream")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,
			"message":{"role":"assistant","content":"{\"ok\":true}"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`)
	})
	res, err := b.client.Do(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
	require.Equal(t, "openai", res.Observation.Vendor)
	require.Equal(t, classify.PathDirect, res.Observation.Path)
	require.Equal(t, 200, res.Observation.Status)
	require.Equal(t, "req_1", res.Observation.Headers["x-request-id"])
	require.Contains(t, res.Observation.Body, "chatcmpl-1")
	require.Equal(t, `{"ok":true}`, res.Content)
	require.Equal(t, "stop", res.FinishReason)
	require.Equal(t, 12, res.InputTokens)
	require.Equal(t, 5, res.OutputTokens)
	require.Empty(t, res.Malformed)
	require.Positive(t, res.Elapsed)
	require.Equal(t, classify.OK, classify.Classify(res.Observation).Class)
}

func TestAnthropicSuccess(t *testing.T) {
	t.Parallel()
	req := baseRequest()
	req.Model = "claude-haiku-4-5"
	req.Temperature = nil
	b := setup(t, "anthropic", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/messages", r.URL.Path)
		require.Equal(t, testKey, r.Header.Get("x-api-key"))
		require.Equal(t, "2023-06-01", r.Header.Get("anthropic-version"))
		require.Empty(t, r.Header.Get("Authorization"))
		require.Equal(t, req.IdempotencyKey, r.Header.Get("Idempotency-Key"))
		require.Equal(t, "r1", r.Header.Get("X-Triage-Record"))
		var body map[string]any
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		require.Equal(t, "claude-haiku-4-5", body["model"])
		require.Equal(t, "Answer with one JSON object.", body["system"])
		require.EqualValues(t, 256, body["max_tokens"])
		require.NotContains(t, body, "temperature")
		require.NotContains(t, body, "response_format")
		require.Equal(t, []any{map[string]any{"role": "user", "content": `Record: {"id":"r1"}`}}, body["messages"])
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5",
			"content":[{"type":"text","text":"{\"ok\":"},{"type":"text","text":"true}"}],
			"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":7}}`)
	})
	res, err := b.client.Do(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
	require.Equal(t, 200, res.Observation.Status)
	require.Equal(t, `{"ok":true}`, res.Content)
	require.Equal(t, "end_turn", res.FinishReason)
	require.Equal(t, 20, res.InputTokens)
	require.Equal(t, 7, res.OutputTokens)
}

func TestErrorStatus(t *testing.T) {
	t.Parallel()
	const body = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Retry-After"] = []string{"20"}
		w.Header()["X-Should-Retry"] = []string{"false"}
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, body)
	})
	res, err := b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	o := res.Observation
	require.Equal(t, classify.PhaseResponse, o.Phase)
	require.Equal(t, 429, o.Status)
	require.Equal(t, body, o.Body)
	require.Equal(t, "20", o.Headers["retry-after"])
	require.Equal(t, "false", o.Headers["x-should-retry"])
	require.Equal(t, "a, b", o.Headers["x-multi"])
	for k := range o.Headers {
		require.Equal(t, strings.ToLower(k), k)
	}
	require.Empty(t, res.Content)
	require.Equal(t, classify.Exhausted, classify.Classify(o).Class)
}

func TestBodyCapped(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3*MaxBodyBytes)
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, big)
	})
	res, err := b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, 500, res.Observation.Status)
	require.Len(t, res.Observation.Body, MaxBodyBytes)
}

func TestNotSentConnectionRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	c, err := New(Options{Vendor: "anthropic", Path: classify.PathGateway, BaseURL: "http://" + addr + "/v1", APIKey: testKey, Timeout: 5 * time.Second})
	require.NoError(t, err)
	res, err := c.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, classify.Observation{Vendor: "anthropic", Path: classify.PathGateway, Phase: classify.PhaseNotSent}, res.Observation)
	require.Equal(t, classify.Transient, classify.Classify(res.Observation).Class)
}

func TestNotSentCallerCancelled(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := b.client.Do(ctx, baseRequest())
	require.NoError(t, err)
	require.Equal(t, classify.PhaseNotSent, res.Observation.Phase)
	require.Zero(t, hits.Load())
}

// TestSentNoResponse: the handler reads the whole request, then never
// answers; the call ends on the key's timeout. Asserted by what happened, not
// by how long it took: Elapsed is measured from a point after the timeout
// starts, so it can be a little under it on a loaded machine.
func TestSentNoResponse(t *testing.T) {
	t.Parallel()
	read := make(chan struct{}, 1)
	b := setup(t, "openai", time.Second, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		read <- struct{}{}
		<-r.Context().Done()
	})
	ctx := context.Background()
	res, err := b.client.Do(ctx, baseRequest())
	require.NoError(t, err)
	<-read // the handler had the whole request
	require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase)
	require.Zero(t, res.Observation.Status)
	require.Contains(t, res.NetworkError, "no answer within the key's timeout", "ended by the timeout")
	require.NoError(t, ctx.Err(), "not by the caller")
	require.Equal(t, classify.Ambiguous, classify.Classify(res.Observation).Class)
}

// hijack answers with raw bytes and closes the connection.
func hijack(t *testing.T, w http.ResponseWriter, r *http.Request, raw string) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	_, _ = buf.WriteString(raw)
	_ = buf.Flush()
	_ = conn.Close()
}

func TestTruncated2xxBody(t *testing.T) {
	t.Parallel()
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		hijack(t, w, r, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"+`{"id":"chatcmpl-1","choices":[{"message":{"content":"{\"ok\"`)
	})
	res, err := b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase)
	require.Equal(t, 200, res.Observation.Status)
	require.Contains(t, res.Observation.Body, "chatcmpl-1")
	require.Empty(t, res.Content)
}

func TestGarbage2xx(t *testing.T) {
	t.Parallel()
	for _, vendor := range []string{"openai", "anthropic"} {
		t.Run(vendor, func(t *testing.T) {
			t.Parallel()
			b := setup(t, vendor, 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, "<html>502 Bad Gateway</html>")
			})
			res, err := b.client.Do(context.Background(), baseRequest())
			require.NoError(t, err)
			require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
			require.Equal(t, "2xx body is not JSON", res.Malformed)
			require.NotContains(t, res.Malformed, "Bad Gateway")
			require.Empty(t, res.Content)
		})
	}
}

// TestNoTransportRetry: a request written on a reused keep-alive connection
// that the server then drops is not resent by net/http, Idempotency-Key or not.
func TestNoTransportRetry(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			fmt.Fprint(w, `{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	res, err := b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, "x", res.Content)

	res, err = b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, classify.PhaseSentNoResponse, res.Observation.Phase)
	require.EqualValues(t, 2, hits.Load(), "the dropped request must not be resent")
}

func TestInvalidRequest(t *testing.T) {
	t.Parallel()
	b := setup(t, "openai", time.Second, func(w http.ResponseWriter, r *http.Request) { t.Error("no request expected") })
	nan := func() *float64 { f := 0.0; f /= f; return &f }()
	for name, mutate := range map[string]func(*Request){
		"model":       func(r *Request) { r.Model = "" },
		"prompt":      func(r *Request) { r.Prompt = "" },
		"idem key":    func(r *Request) { r.IdempotencyKey = "" },
		"record":      func(r *Request) { r.RecordID = "" },
		"max tokens":  func(r *Request) { r.MaxTokens = 0 },
		"temperature": func(r *Request) { r.Temperature = nan },
		"header crlf": func(r *Request) { r.RecordID = "r1\r\nX-Evil: 1" },
	} {
		r := baseRequest()
		mutate(&r)
		_, err := b.client.Do(context.Background(), r)
		require.ErrorIs(t, err, ErrInvalidRequest, name)
		require.NotContains(t, err.Error(), testKey)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"openai", "azure-openai", "openrouter", "groq", "vllm", "ollama", "together",
		"fireworks", "xai", "deepseek", "mistral", "litellm-proxy", "cloudflare-ai-gateway", "other"} {
		c, err := New(Options{Vendor: v, BaseURL: "https://example.test/v1", APIKey: testKey})
		require.NoError(t, err, v)
		require.Equal(t, FormatOpenAI, c.Format(), v)
		require.NotContains(t, c.String(), testKey)
		require.NotContains(t, fmt.Sprintf("%v %+v", c, c), testKey)
	}
	c, err := New(Options{Vendor: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: testKey})
	require.NoError(t, err)
	require.Equal(t, FormatAnthropic, c.Format())

	for _, v := range []string{"gemini", "vertex", "bedrock", "cohere", "", "OpenAI"} {
		_, err := New(Options{Vendor: v, BaseURL: "https://example.test", APIKey: testKey})
		require.ErrorIs(t, err, ErrUnsupportedVendor, v)
		require.NotContains(t, err.Error(), testKey)
	}
	for name, o := range map[string]Options{
		"no base url": {Vendor: "openai", APIKey: testKey},
		"bad scheme":  {Vendor: "openai", BaseURL: "ftp://x", APIKey: testKey},
		"no key":      {Vendor: "openai", BaseURL: "https://x"},
		"key newline": {Vendor: "openai", BaseURL: "https://x", APIKey: testKey + "\n"},
		"neg timeout": {Vendor: "openai", BaseURL: "https://x", APIKey: testKey, Timeout: -1},
		"key in url":  {Vendor: "openai", BaseURL: "https://" + testKey + "@::bad", APIKey: testKey},
	} {
		_, err := New(o)
		require.ErrorIs(t, err, ErrInvalidOptions, name)
		require.NotContains(t, err.Error(), testKey, name)
	}
}

func TestTransportPooling(t *testing.T) {
	t.Parallel()
	tr := newTransport(32)
	require.GreaterOrEqual(t, tr.MaxIdleConnsPerHost, 32)
	require.GreaterOrEqual(t, tr.MaxIdleConns, 32)
}

// sse writes events with a flush after each and returns without [DONE] when
// cut is true.
func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	f := w.(http.Flusher)
	for _, e := range events {
		fmt.Fprint(w, e)
		f.Flush()
	}
}

func TestStreamOpenAI(t *testing.T) {
	t.Parallel()
	chunks := []string{
		`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"{\"ok\":"},"finish_reason":null}],"usage":null}` + "\n\n",
		": keep-alive\n\n",
		`data: {"choices":[{"index":0,"delta":{"content":"true}"},"finish_reason":"stop"}],"usage":null}` + "\n\n",
		`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}` + "\n\n",
	}
	for _, tc := range []struct {
		name   string
		events []string
		phase  classify.Phase
	}{
		{"complete", append(append([]string{}, chunks...), "data: [DONE]\n\n"), classify.PhaseResponse},
		{"cut", chunks[:2], classify.PhaseStream},
		{"error event", append(chunks[:2:2], `data: {"error":{"message":"The server had an error","type":"server_error"}}`+"\n\n"), classify.PhaseStream},
		{"openrouter error finish", append(chunks[:1:1], `data: {"choices":[{"delta":{"content":""},"finish_reason":"error"}],"error":{"code":502,"message":"upstream"}}`+"\n\n"), classify.PhaseStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
				var body map[string]any
				require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
				require.Equal(t, true, body["stream"])
				require.Equal(t, map[string]any{"include_usage": true}, body["stream_options"])
				require.Equal(t, "text/event-stream", r.Header.Get("Accept"))
				sse(w, tc.events...)
			})
			req := baseRequest()
			req.Stream = true
			res, err := b.client.Do(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tc.phase, res.Observation.Phase)
			require.Equal(t, 200, res.Observation.Status)
			require.Equal(t, strings.Join(tc.events, ""), res.Observation.Body)
			if tc.phase == classify.PhaseResponse {
				require.Equal(t, `{"ok":true}`, res.Content)
				require.Equal(t, "stop", res.FinishReason)
				require.Equal(t, 9, res.InputTokens)
				require.Equal(t, 4, res.OutputTokens)
			} else {
				require.Equal(t, classify.Ambiguous, classify.Classify(res.Observation).Class)
			}
		})
	}
}

func TestStreamAnthropic(t *testing.T) {
	t.Parallel()
	head := []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: ping\ndata: {\"type\": \"ping\"}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n",
	}
	tail := []string{
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" world\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	}
	errEvent := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	for _, tc := range []struct {
		name   string
		events []string
		phase  classify.Phase
	}{
		{"complete", append(append([]string{}, head...), tail...), classify.PhaseResponse},
		{"cut", head, classify.PhaseStream},
		{"error event", append(append([]string{}, head...), errEvent), classify.PhaseStream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "anthropic", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
				var body map[string]any
				require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
				require.Equal(t, true, body["stream"])
				sse(w, tc.events...)
			})
			req := baseRequest()
			req.Stream = true
			res, err := b.client.Do(context.Background(), req)
			require.NoError(t, err)
			require.Equal(t, tc.phase, res.Observation.Phase)
			require.Equal(t, strings.Join(tc.events, ""), res.Observation.Body)
			require.Equal(t, 25, res.InputTokens)
			if tc.phase == classify.PhaseResponse {
				require.Equal(t, "Hello world", res.Content)
				require.Equal(t, "end_turn", res.FinishReason)
				require.Equal(t, 15, res.OutputTokens)
			} else {
				v := classify.Classify(res.Observation)
				require.Equal(t, classify.Ambiguous, v.Class)
			}
		})
	}
}

// TestStreamStalls: a stream that starts and then stalls until the per-call
// timeout is a broken stream, not a hang of the worker.
func TestStreamStalls(t *testing.T) {
	t.Parallel()
	b := setup(t, "openai", 200*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		sse(w, `data: {"choices":[{"delta":{"content":"par"}}]}`+"\n\n")
		<-r.Context().Done()
	})
	req := baseRequest()
	req.Stream = true
	res, err := b.client.Do(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, classify.PhaseStream, res.Observation.Phase)
	require.Equal(t, "par", res.Content)
}

func TestReadLineLong(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 200<<10)
	var st streamState
	br := bufio.NewReaderSize(strings.NewReader(long+"\nnext\n"), 16)
	line, err := readLine(br, &st)
	require.NoError(t, err)
	require.Equal(t, long, line)
	line, err = readLine(br, &st)
	require.NoError(t, err)
	require.Equal(t, "next", line)
	require.Equal(t, MaxBodyBytes, st.raw.Len())
}

func TestAzureBaseURLWithQuery(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/openai/deployments/d1/chat/completions", r.URL.Path)
		require.Equal(t, "2024-10-21", r.URL.Query().Get("api-version"))
		require.Equal(t, testKey, r.Header.Get("api-key"))
		fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Options{Vendor: "azure-openai", BaseURL: srv.URL + "/openai/deployments/d1?api-version=2024-10-21", APIKey: testKey})
	require.NoError(t, err)
	require.NotContains(t, c.String(), "api-version")
	res, err := c.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, "hi", res.Content)
}

func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	b := setup(t, "openai", 5*time.Second, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/elsewhere", http.StatusFound)
	})
	res, err := b.client.Do(context.Background(), baseRequest())
	require.NoError(t, err)
	require.Equal(t, classify.PhaseResponse, res.Observation.Phase)
	require.Equal(t, http.StatusFound, res.Observation.Status)
	require.Equal(t, "/elsewhere", res.Observation.Headers["location"])
	require.EqualValues(t, 1, hits.Load())
}
