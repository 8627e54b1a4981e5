package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/console"
)

func init() {
	register(command{
		name:    "ui",
		summary: "serve the web window: batches, dead letters, keys and River UI ([--addr 127.0.0.1:8080] [--ui-token T])",
		run:     runUI,
	})
}

// uiFlags are --ui-addr and --ui-token of work, run and demo (and --addr of
// `triage ui`).
type uiFlags struct {
	addr, token string
	// addrFlag names the address flag in messages. Default "--ui-addr".
	addrFlag string
}

func (f *uiFlags) defineToken(fs *flag.FlagSet) {
	fs.StringVar(&f.token, "ui-token", "", "token the web window requires, as a bearer token or basic-auth password (default $"+console.EnvToken+"); required for a non-loopback address")
}

// resolve fills the token from the environment and checks the address, so
// a bad address or a missing token fails before anything starts (exit 2).
func (f *uiFlags) resolve(e *env) error {
	if f.token == "" {
		f.token = e.getenv(console.EnvToken)
	}
	if f.addr == "" {
		return nil
	}
	if err := console.CheckAddr(f.addr, f.token); err != nil {
		name := f.addrFlag
		if name == "" {
			name = "--ui-addr"
		}
		return usageError{fmt.Errorf("%s: %w", name, err)}
	}
	return nil
}

// webUI is a running console.
type webUI struct {
	// base is the URL of its root, without a trailing slash.
	base string
	// done is closed when the server has stopped; err is then why.
	done chan struct{}
	err  error
	stop context.CancelFunc
}

// Close stops the server and waits for it.
func (u *webUI) Close() error {
	u.stop()
	<-u.done
	return u.err
}

// startUI listens on ln's address and serves the console on d until ctx ends
// or Close. cfg may be nil (no triage.toml: requeue is refused).
func startUI(ctx context.Context, d *db, cfg *config.Config, ln net.Listener, token string, log *slog.Logger) (*webUI, error) {
	srv, err := console.New(console.Options{Pool: d.pool, Config: cfg, Logger: log, Token: token, RetryBudget: fleetRetryBudget()})
	if err != nil {
		ln.Close()
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	if err := srv.Start(ctx); err != nil {
		stop()
		ln.Close()
		return nil, err
	}
	u := &webUI{base: "http://" + ln.Addr().String(), done: make(chan struct{}), stop: stop}
	go func() {
		defer close(u.done)
		u.err = console.Serve(ctx, ln, srv)
	}()
	return u, nil
}

// listenUI is console.Listen with the CLI's error kinds: a refused address
// is bad usage (2), a port in use a runtime error (1).
func listenUI(addr, token string) (net.Listener, error) {
	ln, err := console.Listen(addr, token)
	if errors.Is(err, console.ErrTokenRequired) {
		return nil, usageError{err}
	}
	return ln, err
}

func runUI(ctx context.Context, e *env, args []string) int {
	const cmd = "ui"
	fs := flag.NewFlagSet("triage ui", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := uiFlags{addrFlag: "--addr"}
	fs.StringVar(&f.addr, "addr", console.AddrDefault, "listen address; anything but loopback needs --ui-token")
	f.defineToken(fs)
	setUsage(fs, e,
		"usage: triage ui [--addr 127.0.0.1:8080] [--ui-token T]",
		"Serves triage's pages (/, /batches/B, /dead-letters, /dead-letters/ID, /keys; each also",
		"?format=json) and River UI (/riverui/) until interrupted. From another machine, keep the",
		"loopback default and tunnel: ssh -L 8080:127.0.0.1:8080 host, then open http://127.0.0.1:8080/.",
	)
	if code, ok := parseNoArgs(e, cmd, fs, args); !ok {
		return code
	}
	if err := f.resolve(e); err != nil {
		return failCmd(e, cmd, err)
	}
	cfg, d, err := openDBOptional(ctx, e)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	defer d.Close()
	ln, err := listenUI(f.addr, f.token)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	log := newLogger(e.stderr, slog.LevelInfo)
	u, err := startUI(ctx, d, cfg, ln, f.token, log)
	if err != nil {
		return failCmd(e, cmd, err)
	}
	log.Info("serving the web window", "url", u.base+"/", "river_ui", u.base+console.RiverUIPrefix+"/", "database", d.where)
	if cfg == nil {
		log.Warn("no triage.toml: pages are read-only for requeue (give --config to requeue dead letters)")
	}
	<-u.done
	if u.err != nil {
		return failCmd(e, cmd, u.err)
	}
	return exitOK
}
