package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
)

// count returns the rows of a table in the test's schema.
func (c *cli) count(table string) int {
	c.t.Helper()
	var n int
	require.NoError(c.t, c.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// jobs counts the River jobs in the states.
func (c *cli) jobs(states ...string) int {
	c.t.Helper()
	var n int
	require.NoError(c.t, c.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM river_job WHERE state::text = ANY($1)", states).Scan(&n))
	return n
}

// runBare runs `triage args...` with no --config and only envs set, from the
// package directory (which holds no triage.toml): the read-only commands and
// the demo must work like that.
func runBare(t *testing.T, envs map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return envs[k] }}
	code := run(context.Background(), args, e)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// unreachableURL points at a socket directory with no server in it.
func unreachableURL(t *testing.T) string {
	return "postgres://triage@/triage?host=" + t.TempDir() + "&connect_timeout=2"
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(5))

	r := c.run("", "enqueue", "--pipeline", "enrich", in)
	require.Equal(t, exitOK, r.code, r.stderr)
	id := strings.TrimSpace(r.stdout)
	require.Regexp(t, regexp.MustCompile(`^enrich-\d{8}T\d{6}Z$`), id, "default batch id: pipeline-UTC timestamp")
	require.Contains(t, r.stderr, "enqueued 5 records as batch "+id)
	require.Equal(t, 5, c.count("river_job"))

	// Flags after the file, and stdin.
	r = c.run(jsonl(3), "enqueue", "-", "--pipeline", "enrich", "--batch", "b2")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "b2\n", r.stdout)
	require.Equal(t, 8, c.count("river_job"))
	require.Equal(t, 2, c.count("triage_batch"))

	// A batch id in use is the caller's mistake, and changes nothing.
	r = c.run("", "enqueue", "--pipeline", "enrich", "--batch", "b2", in)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, `batch "b2" already exists`)
	require.Equal(t, 8, c.count("river_job"))
}

func TestEnqueueBadLineEnqueuesNothing(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	lines := strings.Split(jsonl(4), "\n")
	lines[2] = `{"id":"r003","name": oops}`
	in := c.file("bad.jsonl", strings.Join(lines, "\n"))

	r := c.run("", "enqueue", "--pipeline", "enrich", in)
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, in+":3:", "the file and the line are named")
	require.Equal(t, 0, c.count("river_job"))
	require.Equal(t, 0, c.count("triage_batch"))
	require.Equal(t, 0, c.count("triage_record"))

	r = c.run(`{"id":1}`+"\n"+`[1,2]`+"\n", "enqueue", "--pipeline", "enrich", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "stdin:2:")
	require.Equal(t, 0, c.count("river_job"))
	// A null id is not an id.
	r = c.run(`{"id":"a"}`+"\n"+`{"id":null}`+"\n", "enqueue", "--pipeline", "enrich", "-")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "stdin:2:")
	require.Equal(t, 0, c.count("river_job"))
}

// A record the prompt template cannot render is bad input found at enqueue
// (a prompt naming a field the record lacks), not a dead letter per record.
func TestEnqueueRecordTheTemplateCannotRender(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	dlqRewriteConfig(t, c, `prompt = "Record: {{json .}}"`, `prompt = "Company: {{.name}}"`)
	in := c.file("in.jsonl", `{"id":"a","name":"Acme"}`+"\n"+`{"id":"b","title":"no name"}`+"\n")
	r := c.run("", "enqueue", "--pipeline", "enrich", in)
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, in+":2:")
	require.Contains(t, r.stderr, "name")
	require.Equal(t, 0, c.count("river_job"))
	require.Equal(t, 0, c.count("triage_batch"))
}

func TestEnqueueBadUsage(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	in := c.file("in.jsonl", jsonl(2))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"enqueue", "--pipeline", "enrich", "--frobnicate", in}, "flag provided but not defined"},
		{"no pipeline", []string{"enqueue", in}, "--pipeline is required"},
		{"unknown pipeline", []string{"enqueue", "--pipeline", "nope", in}, "nope"},
		{"no file", []string{"enqueue", "--pipeline", "enrich"}, "name the JSONL file"},
		{"two files", []string{"enqueue", "--pipeline", "enrich", in, in}, "one file at a time"},
		{"missing file", []string{"enqueue", "--pipeline", "enrich", in + ".missing"}, "no such file"},
		{"empty file", []string{"enqueue", "--pipeline", "enrich", c.file("empty.jsonl", "\n\n")}, "holds no records"},
		{"missing config", []string{"--config", c.config + ".missing", "enqueue", "--pipeline", "enrich", in}, "does not exist"},
	} {
		r := c.run("", tc.args...)
		require.Equal(t, exitUsage, r.code, "%s: %s", tc.name, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.name)
	}
	require.Equal(t, 0, c.count("triage_batch"))

	r := c.run("", "enqueue", "-h")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stderr, "usage: triage enqueue")
}

func TestCommandsWithUnreachableDatabase(t *testing.T) {
	t.Parallel()
	c := newCLI(t, fakeprovider.Scenario{}, "")
	c.envs["DATABASE_URL"] = unreachableURL(t)
	in := c.file("in.jsonl", jsonl(2))
	for _, args := range [][]string{
		{"migrate"},
		{"enqueue", "--pipeline", "enrich", in},
		{"run", "--pipeline", "enrich", in},
		{"work", "--exit-when-idle"},
		{"status"},
		{"export", "b1"},
		{"ledger"},
	} {
		r := c.run("", args...)
		require.Equal(t, exitRuntime, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "unreachable", "%v", args)
	}
}

func TestParseInterleaved(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	p := fs.String("pipeline", "", "")
	j := fs.Bool("json", false, "")
	pos, err := parseInterleaved(fs, []string{"a", "--pipeline", "p", "b", "--json", "--", "--c", "-"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "--c", "-"}, pos)
	require.Equal(t, "p", *p)
	require.True(t, *j)

	_, err = parseInterleaved(fs, []string{"a", "--nope"})
	require.Error(t, err)
	require.Equal(t, exitUsage, parseFailed(err))
	_, err = parseInterleaved(fs, []string{"-h"})
	require.Equal(t, exitOK, parseFailed(err))
}
