package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/worker/workertest"
)

// A non-loopback address without a token refuses to start (exit 2), before
// anything is enqueued or served.
func TestUINonLoopbackNeedsToken(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(2))
	for _, args := range [][]string{
		{"ui", "--addr", "0.0.0.0:0"},
		{"ui", "--addr", ":0"},
		{"work", "--ui-addr", "0.0.0.0:0"},
		{"run", "--pipeline", workertest.Pipeline, "--batch", "b1", "--ui-addr", "0.0.0.0:0", in},
		{"demo", "--ui-addr", "0.0.0.0:0"},
	} {
		r := c.run("", args...)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "needs a token (--ui-token or TRIAGE_UI_TOKEN)", args)
		require.Contains(t, r.stderr, "ssh -L 8080:127.0.0.1:8080", args)
	}
	r := c.run("", "status", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "[]\n", r.stdout, "run enqueued nothing")
}

// With a token (here from TRIAGE_UI_TOKEN) a request without it gets 401;
// with it, the pages answer; an interrupt stops the server (exit 0).
func TestUIServesWithToken(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	c.envs["TRIAGE_UI_TOKEN"] = "tok-123"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errb bytes.Buffer
	stderr := &syncWriter{w: &errb}
	done := make(chan int, 1)
	go func() {
		e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: stderr, getenv: func(k string) string { return c.envs[k] }}
		done <- run(ctx, []string{"--config", c.config, "ui", "--addr", addr}, e)
	}()
	status := func(token string) int {
		req, err := http.NewRequest("GET", "http://"+addr+"/keys?format=json", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	workertest.Eventually(t, 30*time.Second, "the console serves", func() bool { return status("tok-123") == 200 })
	require.Equal(t, http.StatusUnauthorized, status(""))
	require.Equal(t, http.StatusUnauthorized, status("wrong"))
	cancel()
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatal("triage ui did not stop on interrupt")
	}
}

// `triage run --ui-addr` serves the batch's page while the run lasts and
// names its URL.
func TestRunServesUIWhileRunning(t *testing.T) {
	t.Parallel()
	// r001's first call hangs until the key's timeout: the run lasts that long.
	c := newCLI(t, fakeprovider.Scenario{RecordScripts: map[string][]fakeprovider.Step{"r001": {{Action: fakeprovider.ActionHang}}}}, "")
	in := c.file("in.jsonl", jsonl(3))
	var stderr workertest.Buffer
	done := make(chan int, 1)
	go func() {
		e := &env{stdin: strings.NewReader(""), stdout: &bytes.Buffer{}, stderr: &stderr, getenv: func(k string) string { return c.envs[k] }}
		done <- run(context.Background(), []string{"--config", c.config, "run", "--pipeline", workertest.Pipeline, "--batch", "b1",
			"--ui-addr", "127.0.0.1:0", in}, e)
	}()
	urlRe := regexp.MustCompile(`web window: (http://127\.0\.0\.1:\d+/batches/b1)`)
	var pageURL string
	workertest.Eventually(t, 30*time.Second, "run names the page", func() bool {
		m := urlRe.FindStringSubmatch(stderr.String())
		if m != nil {
			pageURL = m[1]
		}
		return m != nil
	})
	resp, err := http.Get(pageURL + "?format=json")
	require.NoError(t, err)
	var st struct {
		Batch string `json:"batch"`
		State string `json:"state"`
		Total int    `json:"total"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "b1", st.Batch)
	require.Equal(t, 3, st.Total)
	select {
	case code := <-done:
		require.Equal(t, exitOK, code, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("run did not finish")
	}
	_, err = http.Get(pageURL)
	require.Error(t, err, "the page is gone with the run")
}
