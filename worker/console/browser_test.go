package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's Chromium through chromedp. `make test`
// installs it (.ci/ensure-chromium); without it they fail rather than skip,
// so CI cannot pass without having looked at the pages.

// chromiumNames are the executables tried, in order; CHROMIUM overrides.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

func chromiumPath() (string, error) {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found (tried " + strings.Join(chromiumNames, ", ") +
		"): install it with .ci/ensure-chromium (apt-get install chromium), or set CHROMIUM")
}

// browser is one headless Chromium shared by the package's tests; each test
// opens its own tab.
var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.cancel != nil {
		browser.cancel()
	}
	os.Exit(code)
}

func startBrowser() (context.Context, error) {
	browser.once.Do(func() {
		path, err := chromiumPath()
		if err != nil {
			browser.err = err
			return
		}
		profile, err := os.MkdirTemp("", "triage-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		// Headless as root in a container: no sandbox, no GPU, and nothing
		// that phones home (updates, sync, QUIC probes) to slow a test down.
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path),
			chromedp.Flag("headless", true),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.NoFirstRun,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(profile),
			chromedp.WindowSize(1280, 900),
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(allocCtx)
		browser.ctx = ctx
		browser.cancel = func() { cancelCtx(); cancelAlloc(); os.RemoveAll(profile) }
		// Start the browser now, so a broken install fails here, once. No
		// timeout on this first call: it would bound the browser's life.
		if err := chromedp.Do(ctx); err != nil {
			browser.err = fmt.Errorf("start %s: %w", path, err)
		}
	})
	return browser.ctx, browser.err
}

// tab opens a new tab for the test, closed at its end; every action of the
// test must finish within timeout.
func tab(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	bctx, err := startBrowser()
	if err != nil {
		t.Fatalf("browser tests need Chromium: %v", err)
	}
	tabCtx, cancel := chromedp.NewContext(bctx)
	if err := chromedp.Do(tabCtx); err != nil { // opens the tab, unbounded like the browser
		cancel()
		t.Fatalf("open a tab: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(tabCtx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel() })
	return ctx
}

// screenshot saves the page as a test artefact: under the test's temp
// directory, and under $TRIAGE_SCREENSHOTS when set (how docs/ gets its
// picture).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("TRIAGE_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		t.Logf("screenshot: %s", p)
	}
}

// text returns the visible text of the first element matching sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// get runs one action that returns a value.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// run runs steps in order.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// navigate opens url and waits for waitFor. The page left behind may reload
// itself (a running batch's) at that moment, which aborts the navigation
// (net::ERR_ABORTED): it is tried again until the tab's deadline.
func navigate(t *testing.T, ctx context.Context, url, waitFor string) {
	t.Helper()
	for {
		err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitVisible(css(waitFor)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
			t.Fatalf("open %s: %v", url, err)
		}
	}
}

// css is a CSS selector (a plain string would be a DOM search).
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// settled runs a read on a page that reloads itself (a running batch's):
// a reload between two steps loses the page's context, so the read is
// tried again, once the element is visible again, until the tab's
// deadline.
func settled[T any](t *testing.T, ctx context.Context, waitFor string, a chromedp.Action[T]) T {
	t.Helper()
	for {
		v, err := chromedp.Run(ctx, a)
		if err == nil {
			return v
		}
		if ctx.Err() != nil {
			t.Fatalf("read after %s: %v", waitFor, err)
		}
		_ = chromedp.Do(ctx, chromedp.WaitVisible(css(waitFor)))
	}
}

// texts reads the visible text of each selector in one round trip, as
// settled does.
func texts(t *testing.T, ctx context.Context, waitFor string, sels ...string) []string {
	t.Helper()
	js := `(() => { const out = []; for (const s of ` + jsonString(sels) + `) { const e = document.querySelector(s);
		out.push(e ? e.innerText : "<missing " + s + ">"); } return out; })()`
	return settled(t, ctx, waitFor, chromedp.Evaluate[[]string](js))
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
