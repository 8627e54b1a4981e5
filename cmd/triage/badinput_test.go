package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/classify"
	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger"
	"github.com/triage-dev/triage/worker/workertest"
)

// batches counts the batches in the world's database: bad input writes none.
func (c *cli) batches() int {
	c.t.Helper()
	var n int
	require.NoError(c.t, c.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM triage_batch").Scan(&n))
	return n
}

func TestEnqueueRefusesNamesUnsafeToPrint(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	for name, tc := range map[string]struct{ line, want string }{
		"escape in id":   {`{"id":"r\u001b[2Jx","text":"a"}`, "in.jsonl:2: record id"},
		"new line in id": {`{"id":"r\nforged","text":"a"}`, "in.jsonl:2: record id"},
		"NUL in id":      {`{"id":"r\u0000","text":"a"}`, "in.jsonl:2: record id"},
		"NUL in content": {`{"id":"ok","text":"a\u0000b"}`, `in.jsonl:2: a string holds \u0000 (NUL)`},
		"NUL in a key":   {`{"id":"ok","te\u0000xt":"a"}`, `in.jsonl:2: a string holds \u0000`},
	} {
		in := c.file("in.jsonl", `{"id":"first","text":"a"}`+"\n"+tc.line+"\n")
		for _, cmd := range []string{"enqueue", "run"} {
			r := c.run("", cmd, "--pipeline", "enrich", "--batch", "b-"+strings.ReplaceAll(name, " ", "-"), in)
			require.Equal(t, exitUsage, r.code, "%s %s: %s", cmd, name, r.stderr)
			require.Contains(t, r.stderr, tc.want, "%s %s", cmd, name)
			require.NotContains(t, r.stderr, "\x1b", "the refusal itself is safe to print")
			require.NotContains(t, r.stderr, "SQLSTATE")
		}
	}
	require.Zero(t, c.batches(), "nothing was written")
	// An escaped backslash before u0000 is no NUL.
	ok := c.file("ok.jsonl", `{"id":"a","text":"C:\\u0000dir"}`+"\n")
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", "fine", ok)
	require.Equal(t, exitOK, r.code, r.stderr)
}

func TestEnqueueRefusesBadBatchNames(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(2))
	for name, batch := range map[string]string{
		"control": "b\x1b[31m", "new line": "b\nx", "NUL": "b\x00", "too long": strings.Repeat("b", 5000), "blank": "  ",
	} {
		for _, cmd := range []string{"enqueue", "run"} {
			r := c.run("", cmd, "--pipeline", "enrich", "--batch", batch, in)
			require.Equal(t, exitUsage, r.code, "%s %s: %s", cmd, name, r.stderr)
			require.Contains(t, r.stderr, "--batch: batch id", name)
			require.NotContains(t, r.stderr, "\x1b")
			require.Less(t, len(r.stderr), 1000, "the refusal does not echo a huge name")
		}
	}
	require.Zero(t, c.batches())
	r := c.run("", "enqueue", "--pipeline", "enrich", "--batch", strings.Repeat("b", 128), in)
	require.Equal(t, exitOK, r.code, "128 bytes is allowed: %s", r.stderr)
}

func TestRunChecksItCanCallBeforeEnqueueing(t *testing.T) {
	t.Parallel()
	t.Run("key variable unset", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeprovider.Scenario{}, "")
		delete(c.envs, workertest.APIKeyEnv)
		in := c.file("in.jsonl", jsonl(2))
		for _, cmd := range []string{"run", "enqueue"} {
			r := c.run("", cmd, "--pipeline", "enrich", "--batch", "b1", in)
			require.Equal(t, exitUsage, r.code, r.stderr)
			require.Contains(t, r.stderr, workertest.APIKeyEnv)
			require.NotContains(t, r.stderr, "enqueued")
		}
		require.Zero(t, c.batches())
		c.envs[workertest.APIKeyEnv] = cliAPIKey
		r := c.run("", "run", "--pipeline", "enrich", "--batch", "b1", in)
		require.Equal(t, exitOK, r.code, "the same --batch is free to use: %s", r.stderr)
	})
	t.Run("vendor without a client", func(t *testing.T) {
		t.Parallel()
		c := newCLI(t, fakeprovider.Scenario{}, "")
		toml := workertest.Config(workertest.ConfigOptions{BaseURL: "http://127.0.0.1:1/v1", Vendor: "gemini"})
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, "triage.toml"), []byte(toml), 0o600))
		r := c.run(jsonl(2), "run", "--pipeline", "enrich", "--batch", "b1", "-")
		require.Equal(t, exitUsage, r.code, r.stderr)
		require.Contains(t, r.stderr, "gemini")
		require.Zero(t, c.batches())
	})
}

// Rows written before names were checked (or by another program) are
// printed escaped, and long values are cut in tables.
func TestHumanOutputEscapesAndTruncatesOutsideValues(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	ctx := context.Background()
	long := strings.Repeat("L", 5000)
	evil := "b\x1b[2J\nforged"
	for _, id := range []string{long, evil} {
		require.NoError(t, ledger.CreateBatch(ctx, c.db.Pool, ledger.Batch{ID: id, Pipeline: "enrich", Key: "main"},
			[]ledger.Record{{ID: "r\x1b]0;t\x07", Line: 1, Data: json.RawMessage(`{"id":"x"}`)}}))
		_, err := ledger.AddDeadLetter(ctx, c.db.Pool, ledger.DeadLetterRow{Batch: id, RecordID: "r\x1b]0;t\x07", Pipeline: "enrich",
			Class: classify.Rejected, Reason: "bad\x1b[31m", VendorCode: "c\x1bx", Attempts: 1, ErrorExcerpt: "body\x1b[2J"})
		require.NoError(t, err)
	}
	for _, args := range [][]string{{"status"}, {"dlq", "list"}, {"dlq", "show", "1"}, {"dlq", "show", "2"}, {"status", evil}} {
		r := c.run("", args...)
		require.Equal(t, exitOK, r.code, "%v: %s", args, r.stderr)
		require.NotContains(t, r.stdout+r.stderr, "\x1b", "%v", args)
		require.NotContains(t, r.stdout, "\nforged", "%v: a new line in a name cannot forge a line", args)
		if args[0] == "status" && len(args) == 1 || args[1] == "list" {
			for _, line := range strings.Split(r.stdout, "\n") {
				require.Less(t, len(line), 400, "%v: tables cut long values", args)
			}
		}
	}
	r := c.run("", "status", "--json")
	require.Contains(t, r.stdout, long, "--json keeps the whole value")
}

// A base_url where nothing listens: the dead letter names the connection
// error and the host, never the key.
func TestUnreachableEndpointNamedInTheDeadLetter(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	addr := freeAddr(t) // nothing listens here
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: "http://" + addr + "/v1?key=" + cliAPIKey, MaxAttempts: 1})
	require.NoError(t, os.WriteFile(c.config, []byte(toml), 0o600))
	r := c.run(jsonl(1), "run", "--pipeline", "enrich", "--batch", "b1", "-")
	require.Equal(t, exitDeadLetters, r.code, r.stderr)
	r = c.run("", "dlq", "show", "1")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "connection refused")
	require.Contains(t, r.stdout, "(host "+addr+")")
	require.NotContains(t, r.stdout, cliAPIKey)
	r = c.run("", "dlq", "show", "1", "--json")
	require.Contains(t, r.stdout, "connection refused")
}

// A bad setting is refused with its name and exit 2, not run as the
// default: a negative wait in the configuration file (named with the file
// and the key) or on the command line.
func TestBadSettingsAreRefusedByName(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(2))
	r := c.run("", "run", "--pipeline", "enrich", "--batch", "b1", "--progress-interval", "-1s", in)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "--progress-interval must not be negative")

	toml := workertest.Config(workertest.ConfigOptions{BaseURL: "http://127.0.0.1:1/v1"})
	toml = strings.Replace(toml, "[[keys]]\n", "[[keys]]\nstorm_alert_after = \"-5m\"\n", 1)
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "triage.toml"), []byte(toml), 0o600))
	r = c.run("", "run", "--pipeline", "enrich", "--batch", "b1", in)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `triage.toml: keys[0] "main": storm_alert_after "-5m": must be positive`)
	require.Zero(t, c.batches())
}
