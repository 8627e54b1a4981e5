package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics and /healthz. It has no authentication.
func (m *Metrics) Handler() http.Handler { return m.handler }

func (m *Metrics) newHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:            m.reg,
		ErrorLog:            slog.NewLogLogger(m.opts.Logger.Handler(), slog.LevelWarn),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
	})))
	mux.HandleFunc("GET /healthz", m.healthz)
	return mux
}

// healthz answers 200 when the database answers a ping in time. The reason
// it gives otherwise is fixed text: no error detail, which could carry the
// server's address or user.
func (m *Metrics) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), m.opts.HealthTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	err := m.pool.Ping(ctx)
	switch {
	case err == nil:
		_, _ = fmt.Fprintln(w, "ok")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "database did not answer within %s\n", m.opts.HealthTimeout)
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		m.opts.Logger.WarnContext(r.Context(), "metrics: health check failed", "error", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintln(w, "database unreachable")
	}
}

// Serve listens on addr and serves Handler until ctx ends, then shuts down,
// waiting up to Options.ShutdownTimeout for requests in flight. It returns
// nil after a shutdown on ctx, else the error that stopped it. Nothing it
// serves is authenticated: choosing a loopback or private addr is the
// caller's job.
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	if addr == "" {
		return errors.New("metrics: no listen address")
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen: %w", err)
	}
	return m.ServeListener(ctx, ln)
}

// ServeListener is Serve on a listener the caller opened (tests use port 0).
// It closes ln.
func (m *Metrics) ServeListener(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           m.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(m.opts.Logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		return fmt.Errorf("metrics: serve: %w", serr)
	}
	if err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}
