// Command fakeprovider serves the fake LLM provider (package fakeprovider)
// standalone, for the demo, manual runs and scripts:
//
//	fakeprovider --addr 127.0.0.1:8089 [--scenario FILE|NAME] [--log-level debug]
//
// It prints the URL it listens on as its first line on stdout, logs to stderr,
// and stops cleanly on SIGINT or SIGTERM, hung requests included.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/triage-dev/triage/fakeprovider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "fakeprovider:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "fakeprovider:", err)
		os.Exit(1)
	}
}

// usageError is bad flags or a bad scenario: exit code 2, as for triage.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// shutdownTimeout bounds how long in-flight answers may take to finish once
// hangs have been released.
const shutdownTimeout = 5 * time.Second

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8089", "address to listen on (port 0 picks a free one)")
	scenario := fs.String("scenario", "", "scenario JSON file, or a shipped scenario name ("+fmt.Sprint(fakeprovider.ScenarioNames())+"); none: every request succeeds")
	level := fs.String("log-level", "info", "debug logs every call")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %v", fs.Args())}
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError{fmt.Errorf("--log-level: %w", err)}
	}

	var sc fakeprovider.Scenario
	if *scenario != "" {
		var err error
		if sc, err = fakeprovider.LoadScenarioFile(*scenario); err != nil {
			return usageError{err}
		}
	}
	sc.Logger = newLogger(stderr, lvl)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fp := fakeprovider.New(sc)
	srv := &http.Server{Handler: fp, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(sc.Logger.Handler(), slog.LevelWarn)}
	url := "http://" + ln.Addr().String()
	fmt.Fprintln(stdout, url)
	sc.Logger.Info("listening", "url", url, "scenario", sc.Name, "openai_base_url", url+"/v1", "anthropic_base_url", url+"/v1")

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sc.Logger.Info("shutting down")
	// Release hangs first: Shutdown waits for every handler, and a hang would
	// otherwise hold it until the timeout.
	_ = fp.Close()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	sc.Logger.Info("stopped")
	return nil
}

// newLogger writes text to a terminal and JSON otherwise, as triage does.
func newLogger(w io.Writer, lvl slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: lvl}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, opts))
		}
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
