package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/triage-dev/triage/ledger/pgcluster"
)

// embeddedDir is where the private cluster of the embedded default lives.
const embeddedDir = ".triage/pg"

func init() {
	register(command{name: "db", summary: "manage the private local PostgreSQL cluster (start, stop, url); size: the disk the ledger uses per table", run: cmdDB})
}

func cmdDB(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "usage: triage db start|stop|url [--dir DIR] | triage db size [--json]")
		return exitUsage
	}
	sub, args := args[0], args[1:]
	if sub == "size" {
		return dbSize(ctx, e, args)
	}
	fs := flag.NewFlagSet("db "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	dir := fs.String("dir", embeddedDir, "data directory of the private cluster")
	fast := fs.Bool("fast", false, "start: turn durability off (throwaway test clusters only)")
	remove := fs.Bool("remove", false, "stop: also delete the cluster's files")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "triage db %s: unexpected argument %q\n", sub, fs.Arg(0))
		return exitUsage
	}
	switch sub {
	case "start", "url":
		opts := pgcluster.Options{}
		if *fast {
			opts.Fast, opts.MaxConnections = true, 300
		}
		c, err := pgcluster.Start(ctx, *dir, opts)
		if err != nil {
			fmt.Fprintf(e.stderr, "triage db %s: %v\n", sub, err)
			return exitRuntime
		}
		fmt.Fprintln(e.stdout, c.URL())
		if c.Shadow() {
			fmt.Fprintf(e.stderr, "the cluster's files live in %s: the server's OS user cannot enter %s "+
				"(`triage db stop --remove` removes both)\n", c.DataDir, c.Dir)
		}
		return exitOK
	case "stop":
		c, err := pgcluster.Open(*dir)
		if err != nil {
			if errors.Is(err, pgcluster.ErrNoBinaries) {
				fmt.Fprintf(e.stderr, "triage db stop: %v\n", err)
			} else {
				fmt.Fprintf(e.stderr, "triage db stop: %s: %v\n", filepath.Clean(*dir), err)
			}
			return exitRuntime
		}
		if !*remove {
			if err := c.Stop(ctx); err != nil {
				fmt.Fprintf(e.stderr, "triage db stop: %v\n", err)
				return exitRuntime
			}
			fmt.Fprintf(e.stderr, "stopped the cluster in %s\n", c.Dir)
			return exitOK
		}
		// What Remove deletes: the directory, and the shadow directory
		// holding the files when the server could not enter it.
		removed := []string{c.Dir}
		if c.DataDir != filepath.Join(c.Dir, "data") {
			removed = append(removed, filepath.Dir(c.DataDir))
		}
		if err := c.Remove(ctx); err != nil {
			fmt.Fprintf(e.stderr, "triage db stop: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintf(e.stderr, "stopped the cluster and removed its files (the whole database): %s\n", strings.Join(removed, " and "))
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "triage db: unknown subcommand %q (want start, stop, url or size)\n", sub)
		return exitUsage
	}
}
