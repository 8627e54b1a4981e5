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

// Pages that show a running batch reload themselves (a meta refresh, every
// Options.Refresh). A test drives them without knowing when: a reload may
// land between two of its steps, under a read, or while it opens another
// page. The helpers below are the only way the tests touch a page, and
// each survives a reload:
//
//   - navigate opens a URL and waits until a loaded document of that URL
//     shows the element the test needs. A navigation that the page left
//     behind pre-empts with its own reload fails with net::ERR_ABORTED
//     (chromedp follows the reload's request, which the navigation then
//     cancels): it is made again.
//   - read evaluates one JavaScript expression, in one round trip, in a
//     document that has finished loading: never in the old document's last
//     moment, never in a new one half parsed. A reload under the read
//     destroys its context; the read is then made in the next document.
//   - text and texts are reads.
//
// A click on a self-reloading page would race the reload too: the tests
// read a link's href and navigate to it instead (clicks stay on the
// confirmation and form pages, which never reload themselves).
// setupOpts.reloadAtOnce makes every self-reload immediate, so a test meets
// the race on every step rather than now and then.

// screenshot saves the page as a test artefact: under the test's temp
// directory, and under $TRIAGE_SCREENSHOTS when set (how docs/ gets its
// picture). It is taken of a loaded document whose self-reload is stopped
// first (window.stop cancels a pending meta refresh): a capture that a
// reload overtakes never finishes. The page stays as it is until the test
// navigates again.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	read[bool](t, ctx, `(window.stop(), true)`)
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

// text returns the visible text of the first element matching sel in the
// loaded document ("<missing SEL>" when there is none).
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return texts(t, ctx, sel)[0]
}

// texts reads the visible text of each selector in one read.
func texts(t *testing.T, ctx context.Context, sels ...string) []string {
	t.Helper()
	return read[[]string](t, ctx, `(() => { const out = []; for (const s of `+jsonString(sels)+`) {
		const e = document.querySelector(s); out.push(e ? e.innerText : "<missing " + s + ">"); } return out; })()`)
}

// count is how many elements match sel in the loaded document.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return read[int](t, ctx, `document.querySelectorAll(`+jsonString(sel)+`).length`)
}

// href is the href attribute of the first element matching sel (a link the
// test follows with navigate), "" when there is none.
func href(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return read[string](t, ctx, `(document.querySelector(`+jsonString(sel)+`) || {href: ""}).href`)
}

// whenLoaded is a promise of expr evaluated in the page's document once it
// has loaded (at once if it has): one task of the page, so no reload
// lands in the middle of it.
func whenLoaded(expr string) string {
	return `new Promise((resolve, reject) => {
	const now = () => { try { resolve(` + expr + `); } catch (e) { reject(e); } };
	if (document.readyState === "complete") now(); else addEventListener("load", now, {once: true});
})`
}

// read evaluates expr, a JavaScript expression, in the loaded document of
// the tab's page; across a reload, in the next document, until the tab's
// deadline.
func read[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	for {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](whenLoaded(expr), chromedp.EvalAwaitPromise))
		if err == nil {
			return v
		}
		if ctx.Err() != nil || !reloaded(err) {
			t.Fatalf("read %s: %v", expr, err)
		}
	}
}

// reloaded tells an error of a read that a navigation (the page's own
// reload) replaced the document under it.
func reloaded(err error) bool {
	t := err.Error()
	return strings.Contains(t, "context was destroyed") || strings.Contains(t, "Cannot find context") ||
		strings.Contains(t, "navigated or closed")
}

// get runs one action that returns a value, on a page that does not reload
// itself (River UI's, a confirmation page).
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// run runs steps in order: the clicks and form fills of pages that do not
// reload themselves.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// navigate opens url and waits until a loaded document of url (the
// location after redirects, as the test expects it) shows waitFor. A
// navigation aborted by the reload of the page it leaves is made again.
func navigate(t *testing.T, ctx context.Context, url, waitFor string) {
	t.Helper()
	for {
		err := chromedp.Do(ctx, chromedp.Navigate(url))
		if err == nil {
			break
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "ERR_ABORTED") {
			t.Fatalf("open %s: %v", url, err)
		}
	}
	arrived(t, ctx, url, waitFor)
}

// arrived waits until a loaded document of url shows waitFor: after a
// navigation, or a click or a form post that leads there. A loaded document
// that is not it (the page left behind, reloaded once more before the
// navigation commits) is waited out: the navigation replaces it.
func arrived(t *testing.T, ctx context.Context, url, waitFor string) {
	t.Helper()
	js := `new Promise(resolve => {
	const check = () => { if (location.href === ` + jsonString(url) + ` && document.querySelector(` + jsonString(waitFor) + `)) resolve(true); };
	if (document.readyState === "complete") check(); else addEventListener("load", check, {once: true});
})`
	for {
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js, chromedp.EvalAwaitPromise))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !reloaded(err) {
			t.Fatalf("open %s, wait for %s: %v", url, waitFor, err)
		}
	}
}

// css is a CSS selector (a plain string would be a DOM search).
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
