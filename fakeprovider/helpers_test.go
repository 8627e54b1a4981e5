package fakeprovider_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/testclock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testKey = "sk-test-0123456789abcdefghijklmnop"

func newClock() *testclock.Clock { return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)) }

type testBundle struct {
	fp     *fakeprovider.Server
	srv    *httptest.Server
	clock  *testclock.Clock
	http   *http.Client
	openai openai.Client
	anth   anthropic.Client
}

// setup serves sc on a fresh server with SDK clients whose retries are off, so
// each call is exactly one request.
func setup(t *testing.T, sc fakeprovider.Scenario) *testBundle {
	t.Helper()
	clk := newClock()
	if sc.Now == nil {
		sc.Now = clk.Now
	}
	if sc.APIKey == "" {
		sc.APIKey = testKey
	}
	fp := fakeprovider.New(sc)
	srv := httptest.NewServer(fp)
	tr := &http.Transport{}
	hc := &http.Client{Transport: tr}
	t.Cleanup(func() {
		fp.Close()
		srv.Close()
		tr.CloseIdleConnections()
	})
	return &testBundle{
		fp: fp, srv: srv, clock: clk, http: hc,
		openai: openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(testKey),
			option.WithMaxRetries(0), option.WithHTTPClient(hc)),
		// The Anthropic SDK adds "v1/" itself.
		anth: anthropic.NewClient(aoption.WithBaseURL(srv.URL), aoption.WithAPIKey(testKey),
			aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc)),
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

const jsonSystem = "You add fields to records. Answer with one JSON object."

func prompt(id string) string { return `Record: {"id":"` + id + `","name":"n-` + id + `"}` }

func oaParams(id string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: openai.ChatModelGPT4oMini,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(jsonSystem),
			openai.UserMessage(prompt(id)),
		},
	}
}

func anParams(id string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 1024,
		System:    []anthropic.TextBlockParam{{Text: jsonSystem}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt(id)))},
	}
}

// rawResp is a response read whole, for tests that look at bytes and headers.
type rawResp struct {
	status int
	header http.Header
	body   string
}

// post sends a raw request in either vendor's format; vendor is "openai" or
// "anthropic".
func (b *testBundle) post(t *testing.T, ctx context.Context, vendor, body string, hdr map[string]string) (rawResp, error) {
	t.Helper()
	path := "/v1/chat/completions"
	if vendor == "anthropic" {
		path = "/v1/messages"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+path, bytes.NewBufferString(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if vendor == "anthropic" {
		req.Header.Set("x-api-key", testKey)
		req.Header.Set("anthropic-version", "2023-06-01")
	} else {
		req.Header.Set("Authorization", "Bearer "+testKey)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return rawResp{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return rawResp{status: resp.StatusCode, header: resp.Header, body: string(data)}, err
}

func rawBody(vendor, id string, stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	if vendor == "anthropic" {
		return `{"model":"claude-sonnet-4-5","max_tokens":512,"stream":` + s + `,"system":"` + jsonSystem +
			`","messages":[{"role":"user","content":"Record: {\"id\":\"` + id + `\"}"}]}`
	}
	return `{"model":"gpt-4o-mini","stream":` + s + `,"messages":[{"role":"system","content":"` + jsonSystem +
		`"},{"role":"user","content":"Record: {\"id\":\"` + id + `\"}"}]}`
}

var vendors = []string{"openai", "anthropic"}

func acts(as ...fakeprovider.Action) []fakeprovider.Step {
	out := make([]fakeprovider.Step, len(as))
	for i, a := range as {
		out[i] = fakeprovider.Step{Action: a}
	}
	return out
}
