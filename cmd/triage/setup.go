package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/migrations"
	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/operator"
)

// configFileDefault is read when neither --config nor TRIAGE_CONFIG names a file.
const configFileDefault = "triage.toml"

// usageError marks errors that are the caller's input (exit 2), as opposed to
// runtime failures (exit 1).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// exitFor maps an error to the contract's exit code.
func exitFor(err error) int {
	var u usageError
	var in *operator.InputError
	if errors.As(err, &u) || errors.As(err, &in) {
		return exitUsage
	}
	return exitRuntime
}

// configPath is the order docs/design.md gives: --config, else ./triage.toml, else the
// file named by $TRIAGE_CONFIG ("default triage.toml, then env").
func configPath(e *env) string {
	if e.configPath != "" {
		return e.configPath
	}
	if _, err := os.Stat(configFileDefault); err == nil {
		return configFileDefault
	}
	if p := e.getenv("TRIAGE_CONFIG"); p != "" {
		return p
	}
	return configFileDefault
}

// loadConfig reads the configuration configPath names.
func loadConfig(e *env) (*config.Config, error) {
	path := configPath(e)
	cfg, err := config.Load(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, usageError{fmt.Errorf("no configuration: %s does not exist (give one with --config FILE or TRIAGE_CONFIG; `triage demo` needs none)", path)}
		}
		return nil, usageError{err}
	}
	return cfg, nil
}

// loadConfigOptional is loadConfig for commands that only read the database
// (status, dlq, ledger, keys): with no --config, no TRIAGE_CONFIG and no
// ./triage.toml it returns nil, nil, and the database comes from DATABASE_URL
// or the embedded default — so `triage demo`'s results can be inspected
// without writing a configuration first.
func loadConfigOptional(e *env) (*config.Config, error) {
	if e.configPath == "" && e.getenv("TRIAGE_CONFIG") == "" {
		if _, err := os.Stat(configFileDefault); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
	}
	return loadConfig(e)
}

// db is an open database for one command.
type db struct {
	pool *pgxpool.Pool
	// where names the database for messages, without credentials.
	where string
	// shadow, for the embedded cluster living outside .triage/pg (the
	// server's OS user cannot enter this directory), is where its files are.
	shadow string
}

func (d *db) Close() { d.pool.Close() }

// openDB connects (see connect) and makes sure the schema is current: the
// embedded cluster is migrated on the spot; a configured database must have
// been migrated with `triage migrate`, so a fleet's schema only changes when
// someone says so.
func openDB(ctx context.Context, e *env, cfg *config.Config) (*db, error) {
	return openWith(ctx, e, cfg, true)
}

// openExistingDB is openDB for the commands that only look (status, dlq,
// export, keys, ledger, ...): they never create the embedded cluster.
func openExistingDB(ctx context.Context, e *env, cfg *config.Config) (*db, error) {
	return openWith(ctx, e, cfg, false)
}

func openWith(ctx context.Context, e *env, cfg *config.Config, create bool) (*db, error) {
	d, embedded, err := connect(ctx, e, cfg, create)
	if err != nil {
		return nil, err
	}
	if embedded {
		if _, err := migrations.Migrate(ctx, d.pool, ""); err != nil {
			d.Close()
			return nil, err
		}
		return d, nil
	}
	if err := checkMigrated(ctx, d.pool); err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", d.where, err)
	}
	return d, nil
}

// connect opens a pool on DATABASE_URL, else [database] url, else the
// private cluster in .triage/pg (embedded is true; initialised on first use
// only when create is set, started if it exists), and checks that the
// server answers. It neither checks nor changes the schema: openDB does, and
// `triage migrate` applies the migrations itself.
func connect(ctx context.Context, e *env, cfg *config.Config, create bool) (d *db, embedded bool, err error) {
	url := e.getenv(config.EnvDatabaseURL)
	if url == "" && cfg != nil {
		url = cfg.Database.URL
	}
	embedded = url == ""
	where, shadow := "", ""
	if embedded {
		if !create && !pgcluster.Exists(embeddedDir) {
			return nil, false, errNoDatabase(e, cfg)
		}
		// A command that only looks does not start a cluster someone
		// stopped: reading must not undo `triage db stop`.
		if !create {
			if c, err := pgcluster.Open(embeddedDir); err == nil && !c.Running(ctx) {
				return nil, false, usageError{fmt.Errorf("the private cluster in %s is stopped (`triage db stop`, or a reboot): "+
					"start it with `triage db start` (or `triage run`, `enqueue` or `work`, which start it), then try again", embeddedDir)}
			}
		}
		c, err := pgcluster.Start(ctx, embeddedDir, pgcluster.Options{})
		if err != nil {
			return nil, false, fmt.Errorf("embedded database in %s: %w", embeddedDir, err)
		}
		url, where = c.URL(), "the private cluster in "+embeddedDir
		if c.Shadow() {
			shadow = c.DataDir
			where += " (files in " + shadow + ")"
		}
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, false, usageError{fmt.Errorf("database URL (DATABASE_URL or [database] url) is not valid: %v", redactErr(err))}
	}
	if where == "" {
		where = fmt.Sprintf("database %q on %s:%d", pcfg.ConnConfig.Database, pcfg.ConnConfig.Host, pcfg.ConnConfig.Port)
	}
	pcfg.MaxConns = max(pcfg.MaxConns, 20)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, false, fmt.Errorf("%s is unreachable (check %s): %w", where, urlSource(e, cfg), err)
	}
	return &db{pool: pool, where: where, shadow: shadow}, embedded, nil
}

// errNoDatabase is a looking command's answer when there is no database to
// look at: where it looked, and how to point it at one (exit 2).
func errNoDatabase(e *env, cfg *config.Config) error {
	cfgNote := "no triage.toml"
	if cfg != nil {
		cfgNote = "no [database] url in " + configPath(e)
	}
	wd, _ := os.Getwd()
	return usageError{fmt.Errorf("no database: DATABASE_URL is not set, %s, and there is no private cluster in %s "+
		"(looked in %s); set DATABASE_URL or [database] url, or run this in the directory where `triage run`, "+
		"`triage enqueue`, `triage work` or `triage demo` created it", cfgNote, embeddedDir, filepath.Join(wd, embeddedDir))}
}

func checkMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	ok, err := migrations.UpToDate(ctx, pool)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("the schema is missing or out of date: run `triage migrate`")
	}
	return nil
}

// redactErr drops a URL's password from a parse error.
func redactErr(err error) string {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) && pe.Unwrap() != nil {
		return pe.Unwrap().Error()
	}
	return "cannot parse it"
}

// newLogger writes text to a terminal and JSON elsewhere, one event a line.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if isTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// isTerminal reports whether w is a terminal (not a file, a pipe, or a
// character device such as /dev/null).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is the width in columns of the terminal w writes to, asked
// of the terminal itself, else $COLUMNS; 0 when unknown.
func terminalWidth(w io.Writer, getenv func(string) string) int {
	if f, ok := w.(*os.File); ok {
		if width, _, err := term.GetSize(int(f.Fd())); err == nil && width > 0 {
			return width
		}
	}
	n, _ := strconv.Atoi(getenv("COLUMNS"))
	return max(n, 0)
}

// urlSource names the setting the database URL came from, for messages.
func urlSource(e *env, cfg *config.Config) string {
	switch {
	case e.getenv(config.EnvDatabaseURL) != "":
		return "DATABASE_URL"
	case cfg != nil && cfg.Database.URL != "":
		return "[database] url"
	default:
		return "the private cluster in " + embeddedDir + "; set DATABASE_URL or [database] url to use another"
	}
}
