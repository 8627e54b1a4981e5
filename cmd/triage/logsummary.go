package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// logRepeatWindow is how long a repeated log message is held back: the
// first one prints, the rest in the window are counted and reported with
// the next one after it.
const logRepeatWindow = 30 * time.Second

// summaryHandler rate-limits repeated log events by message, so River's
// reconnect errors during a database outage (one per second per service)
// become one line and a count instead of a stream over the progress bar.
// Alerts (alert=true) always pass. Safe for concurrent use.
type summaryHandler struct {
	next   slog.Handler
	window time.Duration
	state  *summaryState
}

type summaryState struct {
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	last       time.Time // when one last printed
	suppressed int
}

func newSummaryHandler(next slog.Handler, window time.Duration) *summaryHandler {
	return &summaryHandler{next: next, window: window, state: &summaryState{seen: map[string]*repeat{}}}
}

func (h *summaryHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *summaryHandler) Handle(ctx context.Context, r slog.Record) error {
	alert := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "alert" && a.Value.Kind() == slog.KindBool && a.Value.Bool() {
			alert = true
			return false
		}
		return true
	})
	if alert {
		return h.next.Handle(ctx, r)
	}
	now := r.Time
	if now.IsZero() {
		now = time.Now()
	}
	h.state.mu.Lock()
	rep := h.state.seen[r.Message]
	if rep == nil {
		rep = &repeat{}
		h.state.seen[r.Message] = rep
	}
	if !rep.last.IsZero() && now.Sub(rep.last) < h.window {
		rep.suppressed++
		h.state.mu.Unlock()
		return nil
	}
	n := rep.suppressed
	rep.last, rep.suppressed = now, 0
	h.state.mu.Unlock()
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", n), slog.String("repeated_in", h.window.String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *summaryHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &summaryHandler{next: h.next.WithAttrs(attrs), window: h.window, state: h.state}
}

func (h *summaryHandler) WithGroup(name string) slog.Handler {
	return &summaryHandler{next: h.next.WithGroup(name), window: h.window, state: h.state}
}

// flush says how many events were held back and not yet reported.
func (h *summaryHandler) flush() string {
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	total := 0
	for _, rep := range h.state.seen {
		total += rep.suppressed
		rep.suppressed = 0
	}
	if total == 0 {
		return ""
	}
	return fmt.Sprintf("%d repeated log events held back (each message prints at most once per %s)", total, h.window)
}
