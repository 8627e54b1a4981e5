package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/triage-dev/triage/worker/workertest"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/triage-dev/triage/fakeprovider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type running struct {
	url    string
	cancel context.CancelFunc
	done   chan error
	stderr *workertest.Buffer
	client *http.Client
}

// start runs the command in-process and waits for the URL line, as a script
// reading its stdout would.
func start(t *testing.T, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	r := &running{cancel: cancel, done: make(chan error, 1), stderr: &workertest.Buffer{}}
	go func() {
		err := run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), pw, r.stderr)
		pw.Close()
		r.done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, r.stderr.String())
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	r.url = strings.TrimSpace(line)
	require.True(t, strings.HasPrefix(r.url, "http://127.0.0.1:"), r.url)
	tr := &http.Transport{}
	r.client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		cancel()
		tr.CloseIdleConnections()
	})
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("fakeprovider did not stop")
	}
}

func (r *running) stats(t *testing.T, query string) fakeprovider.Stats {
	t.Helper()
	resp, err := r.client.Get(r.url + "/__stats" + query)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st fakeprovider.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return st
}

func chat(r *running) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-anything")
	return r.client.Do(req)
}

func TestNoScenarioEverythingSucceeds(t *testing.T) {
	r := start(t)
	resp, err := chat(r)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"object": "chat.completion"`)
	require.Equal(t, 1, r.stats(t, "").BilledCalls)
	r.stop(t)
	require.Contains(t, r.stderr.String(), `"msg":"listening"`, "JSON logs when stderr is not a terminal")
}

func TestStopsWithHungRequestsOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hang.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"name":"hangs","script":["hang","hang"]}`), 0o600))
	r := start(t, "--scenario", path)

	errc := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := chat(r)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
	}
	require.Equal(t, 2, r.stats(t, "?min_hanging=2").Hanging, "the long-poll returns once both hang")

	r.stop(t)
	for range 2 {
		require.Error(t, <-errc, "a hung request ends with a dropped connection")
	}
}

func TestShippedScenarioByName(t *testing.T) {
	r := start(t, "--scenario", "exhaustion")
	statuses := map[int]int{}
	for statuses[429] == 0 && statuses[200] < 500 {
		resp, err := chat(r)
		require.NoError(t, err)
		resp.Body.Close()
		statuses[resp.StatusCode]++
	}
	require.Positive(t, statuses[200])
	require.Positive(t, statuses[429], "the balance ran out")
	r.stop(t)
}

func TestUsageErrors(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{
		{"--nope"},
		{"--scenario", "no-such-scenario"},
		{"--log-level", "loud"},
		{"extra"},
	} {
		err := run(context.Background(), args, io.Discard, &stderr)
		var u usageError
		require.ErrorAs(t, err, &u, "%v", args)
	}
	err := run(context.Background(), []string{"--addr", "256.0.0.1:99999"}, io.Discard, &stderr)
	require.Error(t, err)
	require.NotErrorAs(t, err, new(usageError), "a listen failure is a runtime error")
}
