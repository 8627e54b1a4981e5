// Command triage runs batches of LLM calls as durable PostgreSQL-backed jobs.
// This package only parses flags, wires packages together and sets exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"syscall"
)

// Exit codes are a contract (docs/design.md, "CLI (contract)").
const (
	exitOK          = 0
	exitRuntime     = 1
	exitUsage       = 2
	exitDeadLetters = 3
	exitQueued      = 4
)

// env is what every command gets instead of touching os.* directly, so tests can
// run commands in-process.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// configPath is the value of the global --config flag ("" = default lookup).
	configPath string
	// executable is os.Executable; nil: unknown (in-process tests).
	executable func() (string, error)
	// getwd is os.Getwd; nil: unknown (in-process tests).
	getwd func() (string, error)
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
}

// commands is filled by each command's file in an init function, so files that
// add commands do not edit one shared list.
var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := interruptible(context.Background(), sigs, os.Stderr, os.Exit)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv,
		executable: os.Executable, getwd: os.Getwd})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, e *env) int {
	// Global flags come before the command name.
	for len(args) > 0 {
		switch {
		case args[0] == "--config" || args[0] == "-config":
			if len(args) < 2 {
				fmt.Fprintln(e.stderr, "triage: --config needs a file")
				return exitUsage
			}
			e.configPath, args = args[1], args[2:]
			continue
		case len(args[0]) > 9 && args[0][:9] == "--config=":
			e.configPath, args = args[0][9:], args[1:]
			continue
		}
		break
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprintln(e.stdout, "triage "+version())
		return exitOK
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "triage: unknown command %q\n", args[0])
		usage(e.stderr)
		return exitUsage
	}
	return c.run(ctx, e, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: triage [--config FILE] COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

// version is the module version the binary was built from (a tagged
// release), else its VCS revision and time, else "(devel)".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "(devel)"
		if rev != "" {
			v = rev[:min(len(rev), 12)] + " (" + at + dirty + ")"
		}
	}
	return v + " " + bi.GoVersion
}
