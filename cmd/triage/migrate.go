package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/triage-dev/triage/migrations"
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
	if code, ok := parseNoArgs(e, "migrate", fs, args); !ok {
		return code
	}
	cfg, err := loadConfigOptional(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %v\n", err)
		return exitFor(err)
	}
	// Not openDB: migrate is what makes the schema current, and it says
	// what it applied, the embedded cluster's migrations included.
	d, _, err := connect(ctx, e, cfg, false)
	if err != nil {
		fmt.Fprintf(e.stderr, "triage migrate: %v\n", err)
		return exitFor(err)
	}
	defer d.Close()
	where := d.where
	res, err := migrations.Migrate(ctx, d.pool, "")
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
