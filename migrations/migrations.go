package migrations

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

//go:embed *.sql
var embedded embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

// All returns triage's embedded migrations in order.
func All() ([]Migration, error) { return load(embedded) }

// UpToDate reports whether every embedded migration is applied in the
// schema pool's search_path reaches. A schema it cannot read (no
// triage_migration table, no connection) is not up to date; the error is
// only the embedded migrations' own.
func UpToDate(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	all, err := All()
	if err != nil {
		return false, err
	}
	var have int
	if err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM triage_migration").Scan(&have); err != nil {
		return false, nil
	}
	return have >= len(all), nil
}

func load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrations: read: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migrations: file %q is not named NNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("migrations: read %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			if i > 0 && m.Version == out[i-1].Version {
				return nil, fmt.Errorf("migrations: version %03d appears twice (%s, %s)", m.Version, out[i-1].Name, m.Name)
			}
			return nil, fmt.Errorf("migrations: version %03d missing (found %03d_%s)", i+1, m.Version, m.Name)
		}
	}
	return out, nil
}

// lockID is an arbitrary constant advisory-lock key ("triage" in ASCII).
const lockID int64 = 0x747269616765

// Result lists what a Migrate call applied.
type Result struct {
	River  []int // River migration versions applied
	Triage []int // triage migration versions applied
}

// Migrate applies River's migrations, then triage's, into schema ("" = the
// connection's search_path). Idempotent, and safe to run from several
// processes at once.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (*Result, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	return migrate(ctx, pool, schema, all)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, all []Migration) (*Result, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockID); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	// Unlock on the same session; if the process dies, the session ends and
	// PostgreSQL drops the lock, so no crash can leave it held.
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lockID) //nolint:errcheck

	res := &Result{}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return nil, fmt.Errorf("migrate: river: %w", err)
	}
	rr, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("migrate: river: %w", err)
	}
	for _, v := range rr.Versions {
		res.River = append(res.River, v.Version)
	}

	if err := inSchema(ctx, conn.Conn(), schema, `CREATE TABLE IF NOT EXISTS triage_migration (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: version table: %w", err)
	}
	for _, m := range all {
		applied, err := apply(ctx, conn.Conn(), schema, m)
		if err != nil {
			return nil, fmt.Errorf("migrate: %03d_%s: %w", m.Version, m.Name, err)
		}
		if applied {
			res.Triage = append(res.Triage, m.Version)
		}
	}
	return res, nil
}

func apply(ctx context.Context, conn *pgx.Conn, schema string, m Migration) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := setSearchPath(ctx, tx, schema); err != nil {
		return false, err
	}
	var done bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM triage_migration WHERE version = $1)", m.Version).Scan(&done); err != nil {
		return false, err
	}
	if done {
		return false, nil
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return false, err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO triage_migration (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func inSchema(ctx context.Context, conn *pgx.Conn, schema, sql string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if err := setSearchPath(ctx, tx, schema); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func setSearchPath(ctx context.Context, tx pgx.Tx, schema string) error {
	if schema == "" {
		return nil
	}
	_, err := tx.Exec(ctx, "SELECT set_config('search_path', $1, true)", pgx.Identifier{schema}.Sanitize())
	return err
}
