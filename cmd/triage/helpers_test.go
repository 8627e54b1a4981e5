package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/triage-dev/triage/fakeprovider"
	"github.com/triage-dev/triage/ledger/dbtest"
	"github.com/triage-dev/triage/worker/workertest"
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

// cliAPIKey is the fake provider's API key in CLI tests, which look for it
// in output that must be redacted.
const cliAPIKey = "sk-cli-secret"

// newCLI sets up the world; extraTOML is appended to the configuration.
func newCLI(t *testing.T, sc fakeprovider.Scenario, extraTOML string) *cli {
	t.Helper()
	c := &cli{t: t, db: dbtest.New(t), dir: t.TempDir()}
	sc.APIKey = cliAPIKey
	fake, baseURL := workertest.Provider(t, sc)
	c.fake = fake
	c.config = filepath.Join(c.dir, "triage.toml")
	toml := workertest.Config(workertest.ConfigOptions{BaseURL: baseURL, ExtraPipeline: extraTOML})
	require.NoError(t, os.WriteFile(c.config, []byte(toml), 0o600))
	c.envs = map[string]string{"DATABASE_URL": c.db.URL, workertest.APIKeyEnv: cliAPIKey}
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
func jsonl(n int) string { return workertest.JSONL(n) }
