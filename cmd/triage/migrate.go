package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/triage-dev/triage/ledger/pgcluster"
	"github.com/triage-dev/triage/migrations"
	"github.com/triage-dev/triage/worker/config"
)

func init() {
	register(command{
		name:    "migrate",
		summary: "apply River's and triage's migrations to the configured database",
		run:     runMigrate,
	})
}

func runMigrate(ctx context.Context, e *env, args []string) int {
	fs := flag.NewFlagSet("triage migrate", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: triage migrate")
		fmt.Fprintln(e.stderr, "Applies River's and triage's migrations to DATABASE_URL, else [database] url, else the")
		fmt.Fprintln(e.stderr, "private cluster in "+embeddedDir+". Safe to run again and from several machines at once.")
	}
	if err := fs.Parse(args); err != nil {
		return parseFailed(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "triage migrate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	cfg, err := loadConfigOptional(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %v\n", err)
		return exitFor(err)
	}
	pool, where, err := connectUnmigrated(ctx, e, cfg)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %v\n", err)
		return exitFor(err)
	}
	defer pool.Close()
	res, err := migrations.Migrate(ctx, pool, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %s: %v\n", where, err)
		return exitRuntime
	}
	all, err := migrations.All()
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %v\n", err)
		return exitRuntime
	}
	names := map[int]string{}
	for _, m := range all {
		names[m.Version] = fmt.Sprintf("%03d_%s", m.Version, m.Name)
	}
	if len(res.River)+len(res.Triage) == 0 {
		fmt.Fprintf(e.stdout, "%s is up to date\n", where)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "migrated %s\n", where)
	if len(res.River) > 0 {
		vs := make([]string, len(res.River))
		for i, v := range res.River {
			vs[i] = strconv.Itoa(v)
		}
		fmt.Fprintf(e.stdout, "  river:  applied %s\n", strings.Join(vs, ", "))
	}
	if len(res.Triage) > 0 {
		vs := make([]string, len(res.Triage))
		for i, v := range res.Triage {
			vs[i] = names[v]
		}
		fmt.Fprintf(e.stdout, "  triage: applied %s\n", strings.Join(vs, ", "))
	}
	return exitOK
}

// connectUnmigrated is openDB without the schema check (migrate is what makes
// the schema current) and without migrating the embedded cluster on the spot,
// so migrate can say what it applied.
func connectUnmigrated(ctx context.Context, e *env, cfg *config.Config) (*pgxpool.Pool, string, error) {
	url := e.getenv(config.EnvDatabaseURL)
	if url == "" && cfg != nil {
		url = cfg.Database.URL
	}
	where := ""
	if url == "" {
		c, err := pgcluster.Start(ctx, embeddedDir, pgcluster.Options{})
		if err != nil {
			return nil, "", fmt.Errorf("embedded database in %s: %w", embeddedDir, err)
		}
		url, where = c.URL(), "the private cluster in "+embeddedDir
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, "", usageError{fmt.Errorf("database URL (DATABASE_URL or [database] url) is not valid: %v", redactErr(err))}
	}
	if where == "" {
		where = fmt.Sprintf("database %q on %s:%d", pcfg.ConnConfig.Database, pcfg.ConnConfig.Host, pcfg.ConnConfig.Port)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", where, err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("%s is unreachable (set DATABASE_URL or [database] url): %w", where, err)
	}
	return pool, where, nil
}
