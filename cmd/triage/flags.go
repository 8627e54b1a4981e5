package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/triage-dev/triage/worker/config"
)

// parseInterleaved parses fs over args letting flags and positional arguments
// come in any order (`triage enqueue FILE --pipeline P` as well as
// `triage enqueue --pipeline P FILE`); everything after "--" is positional.
// It returns the positional arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// parseFailed maps a flag parse error to its exit code: -h is not a failure.
// The flag package has printed the error and the usage already.
func parseFailed(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

// parseNoArgs is parseInterleaved for a command that takes flags only. When
// the command must stop (a bad flag, -h, a positional argument) it has said
// why on stderr and returns the exit code with ok false.
func parseNoArgs(e *env, cmd string, fs *flag.FlagSet, args []string) (code int, ok bool) {
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseFailed(err), false
	}
	if len(pos) > 0 {
		return failCmd(e, cmd, usageError{fmt.Errorf("unexpected argument %q", pos[0])}), false
	}
	return exitOK, true
}

// failCmd prints a command's error and returns its exit code.
func failCmd(e *env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "triage %s: %v\n", cmd, err)
	return exitFor(err)
}

// openDBOptional opens the database for a command that needs no configuration
// (the config, when present, may name the database; it is nil otherwise).
func openDBOptional(ctx context.Context, e *env) (*config.Config, *db, error) {
	cfg, err := loadConfigOptional(e)
	if err != nil {
		return nil, nil, err
	}
	d, err := openExistingDB(ctx, e, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, d, nil
}

// setUsage sets fs's usage: lines, one a line, then its flags' defaults, on
// stderr.
func setUsage(fs *flag.FlagSet, e *env, lines ...string) {
	fs.Usage = func() {
		for _, l := range lines {
			fmt.Fprintln(e.stderr, l)
		}
		fs.PrintDefaults()
	}
}
