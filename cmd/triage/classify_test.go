package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type classifyBundle struct {
	stdout, stderr bytes.Buffer
}

func runClassifyCLI(t *testing.T, stdin string, args ...string) (int, *classifyBundle) {
	t.Helper()
	b := &classifyBundle{}
	e := &env{stdin: strings.NewReader(stdin), stdout: &b.stdout, stderr: &b.stderr, getenv: func(string) string { return "" }}
	code := run(context.Background(), append([]string{"classify"}, args...), e)
	return code, b
}

func TestClassifyJSONL(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"vendor":"openai","path":"direct","phase":"response","status":429,"headers":{"retry-after":"20"},"body":"{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"param\":null,\"code\":\"rate_limit_exceeded\"}}"}`,
		`{not json`,
		`{"vendor":"anthropic","phase":"response","status":400,"body":"{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"Your credit balance is too low to access the Anthropic API.\"}}"}`,
		`{"vendor":"openai","phase":"not_sent"}`,
	}, "\n") + "\n"
	code, b := runClassifyCLI(t, in, "--jsonl")
	require.Equal(t, exitOK, code, b.stderr.String())
	lines := strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n")
	require.Len(t, lines, 4)
	require.JSONEq(t, `{"class":"throttled","retry_after_s":20,"code":"rate_limit_exceeded","reason":"rate_limit","known":true,"decided_by":"vendor_rule"}`, lines[0])
	var bad map[string]string
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &bad))
	require.True(t, strings.HasPrefix(bad["error"], "line 2: "), bad["error"])
	require.JSONEq(t, `{"class":"exhausted","retry_after_s":null,"code":"invalid_request_error","reason":"credit_balance_too_low","known":true,"decided_by":"vendor_rule"}`, lines[2])
	require.JSONEq(t, `{"class":"transient","retry_after_s":null,"code":null,"reason":"not_sent","known":true,"decided_by":"phase"}`, lines[3])
}

func TestClassifyJSONLLongLine(t *testing.T) {
	t.Parallel()
	body := `{"error":{"message":"` + strings.Repeat("x", 1<<20) + `","type":"insufficient_quota","code":"insufficient_quota"}}`
	obs, err := json.Marshal(map[string]any{"vendor": "openai", "phase": "response", "status": 429, "body": body})
	require.NoError(t, err)
	code, b := runClassifyCLI(t, string(obs)+"\n"+string(obs), "--jsonl") // last line without newline
	require.Equal(t, exitOK, code, b.stderr.String())
	lines := strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		require.Contains(t, l, `"class":"exhausted"`)
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestClassifyJSONLUnreadableStdin(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	e := &env{stdin: failingReader{}, stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	code := run(context.Background(), []string{"classify", "--jsonl"}, e)
	require.Equal(t, exitRuntime, code)
	require.Contains(t, errOut.String(), "disk on fire")
}

func TestClassifySingle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "body.json")
	require.NoError(t, os.WriteFile(f, []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"Rate limited"}}`), 0o600))
	code, b := runClassifyCLI(t, "", "--vendor", "anthropic", "--status", "429",
		"--header", "Retry-After: 12", "--header", "x-should-retry: true", "--body-file", f)
	require.Equal(t, exitOK, code, b.stderr.String())
	require.JSONEq(t, `{"class":"throttled","retry_after_s":12,"code":"rate_limit_error","reason":"rate_limit","known":true,"decided_by":"vendor_rule"}`, b.stdout.String())

	code, b = runClassifyCLI(t, "", "--vendor", "openai", "--phase", "sent_no_response")
	require.Equal(t, exitOK, code, b.stderr.String())
	require.JSONEq(t, `{"class":"ambiguous","retry_after_s":null,"code":null,"reason":"sent_no_response","known":true,"decided_by":"phase"}`, b.stdout.String())
}

func TestClassifyUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown vendor", []string{"--vendor", "acme", "--status", "500"}, "--vendor"},
		{"missing vendor", []string{"--status", "500"}, "--vendor"},
		{"bad status", []string{"--vendor", "openai", "--status", "42"}, "--status"},
		{"bad status text", []string{"--vendor", "openai", "--status", "x"}, "status"},
		{"bad header", []string{"--vendor", "openai", "--status", "500", "--header", "nocolon"}, "header"},
		{"bad path", []string{"--vendor", "openai", "--status", "500", "--path", "tunnel"}, "--path"},
		{"bad phase", []string{"--vendor", "openai", "--status", "500", "--phase", "later"}, "--phase"},
		{"missing body file", []string{"--vendor", "openai", "--status", "500", "--body-file", "/nonexistent/body"}, "/nonexistent/body"},
		{"jsonl with single flags", []string{"--jsonl", "--vendor", "openai"}, "--vendor"},
		{"stray argument", []string{"--vendor", "openai", "--status", "500", "extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, b := runClassifyCLI(t, "", tt.args...)
			require.Equal(t, exitUsage, code)
			require.Contains(t, b.stderr.String(), tt.want)
			require.Empty(t, b.stdout.String())
		})
	}
}

// A typo in a line's vendor is an error on that line, as in single mode, not
// a silent fall back to the generic rules.
func TestClassifyJSONLUnknownVendor(t *testing.T) {
	t.Parallel()
	in := `{"vendor":"opneai","phase":"response","status":429,"body":""}` + "\n" + `{"vendor":"openai","phase":"not_sent"}` + "\n"
	code, b := runClassifyCLI(t, in, "--jsonl")
	require.Equal(t, exitOK, code, b.stderr.String())
	lines := strings.Split(strings.TrimSuffix(b.stdout.String(), "\n"), "\n")
	require.Len(t, lines, 2)
	require.Contains(t, lines[0], `"error":"line 1: vendor \"opneai\" is not one of`)
	require.Contains(t, lines[1], `"class":"transient"`)
}
