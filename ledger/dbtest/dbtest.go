// Package dbtest gives each test its own PostgreSQL schema with River's and
// triage's migrations applied, on a real server, so tests run in parallel and
// never mock the database.
//
// The server is TEST_DATABASE_URL when set (`make test` starts a throwaway
// cluster and sets it). Otherwise a shared cluster is started, or reused, in
// $TMPDIR/triage-test-pg through pgcluster, so `go test ./...` works on a
// machine with the PostgreSQL server binaries and no set-up.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/migrations"
)

// DB is one test's database: a pool whose connections use a private schema.
type DB struct {
	Pool *pgxpool.Pool
	// Schema to give River's Config.Schema and rivermigrate.
	Schema string
	// URL connects to the same server with search_path set to Schema, for
	// code under test that opens its own pool (CLI tests, second processes).
	URL string
}

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the URL of the test server, starting the shared cluster if
// TEST_DATABASE_URL is not set.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
			serverURL = u
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := pgcluster.Start(ctx, filepath.Join(os.TempDir(), "triage-test-pg"), pgcluster.Options{Fast: true, MaxConnections: 300})
		if err != nil {
			serverErr = err
			return
		}
		serverURL = c.URL()
	})
	if serverErr != nil {
		tb.Fatalf("dbtest: no test database (set TEST_DATABASE_URL or install the PostgreSQL server): %v", serverErr)
	}
	return serverURL
}

// Options tune New.
type Options struct {
	// NoMigrate leaves the schema empty. Default false: migrations applied.
	NoMigrate bool
	// MaxConns for the pool. Default 10.
	MaxConns int32
}

// New creates a fresh schema for this test, migrates it and returns a pool on
// it. The schema is dropped when the test ends.
func New(tb testing.TB, opts ...Options) *DB {
	tb.Helper()
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.MaxConns == 0 {
		o.MaxConns = 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := ServerURL(tb)

	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])

	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("dbtest: connect %s: %v", redactURL(base), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("dbtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			tb.Logf("dbtest: drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Logf("dbtest: drop schema %s: %v", schema, err)
		}
	})

	url := WithSearchPath(tb, base, schema)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("dbtest: parse url: %v", err)
	}
	cfg.MaxConns = o.MaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("dbtest: pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	if !o.NoMigrate {
		if _, err := migrations.Migrate(ctx, pool, schema); err != nil {
			tb.Fatalf("dbtest: migrate: %v", err)
		}
	}
	return &DB{Pool: pool, Schema: schema, URL: url}
}

// WithSearchPath returns base with the connection's search_path set to schema.
func WithSearchPath(tb testing.TB, base, schema string) string {
	tb.Helper()
	if _, err := pgx.ParseConfig(base); err != nil {
		tb.Fatalf("dbtest: parse %s: %v", redactURL(base), err)
	}
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "search_path=" + schema
}

func redactURL(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return "(unparseable database URL)"
	}
	return cfg.Host + "/" + cfg.Database
}
