package console

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/triage-dev/triage/worker/config"
	"github.com/triage-dev/triage/worker/decide"
	"github.com/triage-dev/triage/worker/keys"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of Options.
const (
	// RefreshDefault is how often a page reloads itself while a batch it
	// shows is running: often enough to watch, rarely enough to be polite
	// to the database.
	RefreshDefault = 5 * time.Second
	// RiverUIPrefix is where River UI is mounted.
	RiverUIPrefix = "/riverui"
)

// Options configure a Server.
type Options struct {
	// Pool is the database the pages read and the actions write. Required.
	Pool *pgxpool.Pool
	// Schema is River's schema ("" = the connection's search_path), for
	// River UI's client.
	Schema string
	// Config is triage.toml; nil when there is none. Requeue builds jobs
	// from it and refuses without one; the keys page lists its keys.
	Config *config.Config
	// Logger receives request errors and, through the Alerter, the action
	// alerts. Default slog.Default().
	Logger *slog.Logger
	// Alerter raises the alerts of requeue and resume. Default one on
	// Logger, Pool and Config's webhook.
	Alerter *keys.Alerter
	// Token, when set, must come with every request: as a bearer token or
	// as the basic-auth password. Default "": no check (loopback only; see
	// Listen).
	Token string
	// Refresh is the auto-refresh interval of pages showing a running
	// batch. Default RefreshDefault.
	Refresh time.Duration
	// RetryBudget is the fleet retry budget the keys page shows: the one
	// the fleet's workers run with (worker.Options.RetryBudget). Default
	// decide.RetryBudgetDefault.
	RetryBudget decide.RetryBudget
}

// Server is the console's http.Handler. Start it before serving (River UI
// runs background services) and serve it with Serve or any http.Server.
type Server struct {
	opts    Options
	pages   *template.Template
	riverui *riverui.Handler
	handler http.Handler
	// ownAlerter: New made the Alerter, so Start's context closes it.
	ownAlerter bool
}

// WithDefaults returns o with its zero settings replaced by their
// defaults: the one place the console's option defaults are resolved. A
// negative setting is left for New to refuse.
func (o Options) WithDefaults() Options {
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.Refresh = cmp.Or(o.Refresh, RefreshDefault)
	o.RetryBudget = o.RetryBudget.WithDefaults()
	return o
}

// validate refuses what no default can stand for, naming the option.
func (o Options) validate() error {
	if o.Pool == nil {
		return errors.New("console: Options.Pool is required")
	}
	if o.Refresh < 0 {
		return fmt.Errorf("console: Options.Refresh must not be negative, got %s (0 takes the default)", o.Refresh)
	}
	if err := o.RetryBudget.Validate(); err != nil {
		return fmt.Errorf("console: Options.%w", err)
	}
	return nil
}

// New builds the Server: triage's pages, River UI, authentication and
// cross-origin protection.
func New(opts Options) (*Server, error) {
	opts = opts.WithDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	ownAlerter := opts.Alerter == nil
	if ownAlerter {
		webhook := ""
		if opts.Config != nil {
			webhook = opts.Config.Alerts.WebhookURL
		}
		a, err := keys.NewAlerter(keys.AlerterConfig{Logger: opts.Logger, WebhookURL: webhook, Pool: opts.Pool})
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		opts.Alerter = a
	}
	pages, err := template.New("").Funcs(funcs).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console: templates: %w", err)
	}
	rc, err := river.NewClient(riverpgxv5.New(opts.Pool), &river.Config{Schema: opts.Schema, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("console: river client: %w", err)
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(rc, nil),
		Logger:    opts.Logger,
		Prefix:    RiverUIPrefix,
	})
	if err != nil {
		return nil, fmt.Errorf("console: river ui: %w", err)
	}
	s := &Server{opts: opts, pages: pages, riverui: ui, ownAlerter: ownAlerter}

	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.Handle(RiverUIPrefix+"/", ui)
	mux.HandleFunc("GET /{$}", s.batches)
	mux.HandleFunc("GET /batches/{batch}", s.batch)
	mux.HandleFunc("GET /batches/{batch}/{action}", s.confirmControl)
	mux.HandleFunc("POST /batches/{batch}/{action}", s.control)
	mux.HandleFunc("GET /dead-letters", s.deadLetters)
	mux.HandleFunc("GET /dead-letters/{id}", s.deadLetter)
	mux.HandleFunc("GET /dead-letters/requeue", s.confirmRequeue)
	mux.HandleFunc("POST /dead-letters/requeue", s.requeue)
	mux.HandleFunc("GET /keys", s.keys)
	mux.HandleFunc("GET /keys/{key}/resume", s.confirmResume)
	mux.HandleFunc("POST /keys/{key}/resume", s.resume)

	// Cross-origin POSTs (a page elsewhere submitting a form here) are
	// refused by the browser's own Sec-Fetch-Site / Origin headers: no
	// token to thread through every form.
	csrf := http.NewCrossOriginProtection()
	s.handler = authenticate(opts.Token, csrf.Handler(noStore(mux)))
	return s, nil
}

// Start starts River UI's background services until ctx ends. Then an
// Alerter that New made is closed, after sending what it still holds.
func (s *Server) Start(ctx context.Context) error {
	if err := s.riverui.Start(ctx); err != nil {
		return fmt.Errorf("console: start river ui: %w", err)
	}
	if s.ownAlerter {
		go func() {
			<-ctx.Done()
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keys.AlertWebhookTimeoutDefault+time.Second)
			defer cancel()
			_ = s.opts.Alerter.Close(closeCtx) // a failed POST is logged by the Alerter
		}()
	}
	return nil
}

// ServeHTTP serves the pages and River UI.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// noStore keeps browsers from caching live pages (the back button shows a
// requeued record as still dead otherwise).
func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/static/") && !strings.HasPrefix(r.URL.Path, RiverUIPrefix+"/") {
			w.Header().Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// page is what every template gets.
type page struct {
	Title  string
	Nav    string
	Notice string
	Error  string
	// Refresh, in seconds, adds a meta refresh; 0: none.
	Refresh int
	Data    any
}

// wantsJSON reports whether the request asked for ?format=json.
func wantsJSON(r *http.Request) bool { return r.URL.Query().Get("format") == "json" }

// writeJSON writes v as the CLI's --json does (indented, one trailing newline).
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func (s *Server) render(w http.ResponseWriter, status int, name string, p page) {
	var b strings.Builder
	if err := s.pages.ExecuteTemplate(&b, name, p); err != nil {
		s.opts.Logger.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail answers an error: 400 with its message for the caller's mistakes
// (operator.InputError), 404 for what does not exist, 409 for a refused
// requeue, else 500 with a generic message (the detail goes to the log).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := classifyErr(err)
	if status == http.StatusInternalServerError {
		s.opts.Logger.Error("console: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if wantsJSON(r) {
		writeJSON(w, status, map[string]string{"error": msg})
		return
	}
	s.render(w, status, "error.html", page{Title: http.StatusText(status), Error: msg})
}

// refresh is the meta refresh for a page: only while something shown runs.
func (s *Server) refresh(running bool) int {
	if !running {
		return 0
	}
	return max(int(s.opts.Refresh.Round(time.Second)/time.Second), 1)
}

// isNotFound tells pgx's no-rows apart for handlers reading one row.
func isNotFound(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
