package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
)

// cli is one in-process triage world for CLI tests: a private schema (reached
// through DATABASE_URL), a fake provider, and a triage.toml pointing at it.
type cli struct {
	t      *testing.T
	db     *dbtest.DB
	fake   *fakeprovider.Server
	dir    string
	config string
	envs   map[string]string
}

// newCLI sets up the world; extraTOML is appended to the configuration.
func newCLI(t *testing.T, sc fakeprovider.Scenario, extraTOML string) *cli {
	t.Helper()
	c := &cli{t: t, db: dbtest.New(t), dir: t.TempDir()}
	sc.APIKey = "sk-cli-secret"
	c.fake = fakeprovider.New(sc)
	srv := httptest.NewServer(c.fake)
	t.Cleanup(func() { c.fake.Close(); srv.Close() })
	c.config = filepath.Join(c.dir, "triage.toml")
	toml := fmt.Sprintf(`
[[keys]]
name = "main"
vendor = "openai"
base_url = %q
api_key_env = "FAKE_API_KEY"
concurrency = 4
timeout = "5s"
probe_interval = "500ms"

[[models]]
name = "fake-model"
key = "main"
input_usd_per_mtok = 0.15
output_usd_per_mtok = 0.60

[[pipelines]]
name = "enrich"
model = "fake-model"
system = "You add fields to records. Answer with one JSON object."
prompt = "Record: {{json .}}"
%s`, srv.URL+"/v1", extraTOML)
	require.NoError(t, os.WriteFile(c.config, []byte(toml), 0o600))
	c.envs = map[string]string{"DATABASE_URL": c.db.URL, "FAKE_API_KEY": "sk-cli-secret"}
	return c
}

// file writes a file in the test's directory and returns its path.
func (c *cli) file(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.dir, name)
	require.NoError(c.t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// result is one command's outcome.
type result struct {
	code           int
	stdout, stderr string
}

// run runs `triage --config <config> args...` in-process.
func (c *cli) run(stdin string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb,
		getenv: func(k string) string { return c.envs[k] }}
	code := run(context.Background(), append([]string{"--config", c.config}, args...), e)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// jsonl makes n records r001..rNNN.
func jsonl(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"id":"r%03d","name":"name %d"}`+"\n", i, i)
	}
	return b.String()
}
