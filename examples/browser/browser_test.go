package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idemgo/idem/idemhttp"
)

// browserTimeout bounds the whole browser test, Chromium's start included.
// The test waits for conditions only; what it waits for takes a few
// seconds even on a loaded machine, and the bound turns a hang into a
// failure.
const browserTimeout = 3 * time.Minute

// TestLostAnswerAndReload pays on the page, in a headless Chromium, through
// a proxy between the page and the API that loses the first answer after
// the API committed the payment, and holds the page's own retry, during
// which the test reloads the page. The reloaded page finds the payment in
// sessionStorage, sends it again with the same key, and shows the answer
// that was lost, replayed; the database holds one payment and one key.
func TestLostAnswerAndReload(t *testing.T) {
	chromium := findChromium(t)
	db := testDB(t)
	pageURL, proxy := startServers(t, db)
	proxy.plan = []http.HandlerFunc{proxy.loseAnswer, proxy.hold}

	ctx := startBrowser(t, chromium)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(`#pay:enabled`)),
		chromedp.Click(chromedp.CSS(`#pay`)),
	); err != nil {
		t.Fatalf("paying: %v", err)
	}
	for _, w := range []struct {
		what string
		c    <-chan struct{}
	}{{"the first answer to be lost", proxy.lost}, {"the second attempt", proxy.held}} {
		select {
		case <-w.c:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; the page says %q", w.what, ctx.Err(), pageStatus(t, ctx))
		}
	}
	// The retry is the page's own, after the failed fetch.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#status[data-state="sending"][data-attempt="2"]`))); err != nil {
		t.Fatalf("waiting for the page's second attempt: %v", err)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.parse(sessionStorage.getItem("payment")).key`))
	if err != nil {
		t.Fatalf("the key in sessionStorage: %v", err)
	}
	if n := count(t, db, "payments"); n != 1 {
		t.Fatalf("%d payments after the lost answer, want 1: the API committed before it answered", n)
	}

	if err := chromedp.Do(ctx,
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`#answer[data-status]`)),
	); err != nil {
		t.Fatalf("reloading and waiting for the answer: %v; the page says %q", err, pageStatus(t, ctx))
	}
	type shown struct {
		Status, Replayed, Body, Key, Attempt string
		Pending                              bool
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[shown](`({
		Status: document.getElementById("answer").dataset.status,
		Replayed: document.getElementById("answer").dataset.replayed,
		Body: document.getElementById("answer-body").textContent,
		Key: document.getElementById("key").textContent,
		Attempt: document.getElementById("status").dataset.attempt,
		Pending: sessionStorage.getItem("payment") !== null,
	})`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}

	keys, _, lostStatus, lostBody := proxy.seen()
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] || kept != keys[0] {
		t.Fatalf("the POSTs carried the keys %q and sessionStorage held %q, want 3 POSTs under that key", keys, kept)
	}
	want := shown{Status: "201", Replayed: "true", Body: string(lostBody), Key: keys[0], Attempt: "3"}
	if got != want || lostStatus != http.StatusCreated {
		t.Errorf("the page shows %+v, want %+v (the lost answer was %d)", got, want, lostStatus)
	}
	if n := count(t, db, "payments"); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
	if n := count(t, db, "idempotency_keys"); n != 1 {
		t.Errorf("%d keys stored, want 1", n)
	}
}

// TestRetryAfter pays on the page, in a headless Chromium, through a proxy
// that answers the first attempt as idemhttp answers a request whose key
// another request holds: 409 in-flight, with a Retry-After of 2 s. The
// page can read it only because the API exposes it, and it waits that
// long before its retry, where its own back-off would wait 100 ms at most;
// the retry is the first to reach the API, and its answer is no replay.
func TestRetryAfter(t *testing.T) {
	chromium := findChromium(t)
	db := testDB(t)
	pageURL, proxy := startServers(t, db)
	const retryAfter = 2 * time.Second
	mw, err := idemhttp.NewWithRunner(testStore(t), heldRunner{}, idemhttp.WithSingleClient(), idemhttp.WithRetryAfter(retryAfter))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	busy := withCORS("http://"+u.Host, mw.Handler(http.HandlerFunc(pay)))
	proxy.plan = []http.HandlerFunc{busy.ServeHTTP}

	ctx := startBrowser(t, chromium)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(pageURL),
		chromedp.WaitVisible(chromedp.CSS(`#pay:enabled`)),
		chromedp.Click(chromedp.CSS(`#pay`)),
		chromedp.WaitVisible(chromedp.CSS(`#answer[data-status]`)),
	); err != nil {
		t.Fatalf("paying: %v; the page says %q", err, pageStatus(t, ctx))
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
		document.getElementById("answer").dataset.status,
		document.getElementById("answer").dataset.replayed,
		document.getElementById("status").dataset.wait,
		document.getElementById("status").dataset.attempt,
	]`))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	if want := []string{"201", "false", "2000", "2"}; !slices.Equal(got, want) {
		t.Errorf("the page shows status, replayed, wait and attempt %q, want %q", got, want)
	}
	keys, times, _, _ := proxy.seen()
	if len(keys) != 2 || keys[0] == "" || keys[1] != keys[0] {
		t.Fatalf("the POSTs carried the keys %q, want 2 under one key", keys)
	}
	if gap := times[1].Sub(times[0]); gap < retryAfter {
		t.Errorf("the retry came %v after the 409, before its Retry-After of %v", gap, retryAfter)
	}
	if n := count(t, db, "payments"); n != 1 {
		t.Errorf("%d payments, want 1", n)
	}
}

// startServers starts the API on db, the proxy in front of it and the page
// that calls the API through the proxy, each on a free port of loopback:
// the page's origin is not the proxy's, so CORS applies. It returns the
// page's URL and the proxy, whose plan the test sets before the first POST.
func startServers(t *testing.T, db *sql.DB) (pageURL string, proxy *lossyProxy) {
	t.Helper()
	pageSrv := httptest.NewUnstartedServer(nil) // its address is the origin the API allows
	pageOrigin := "http://" + pageSrv.Listener.Addr().String()
	api, err := newAPI(context.Background(), db, pageOrigin)
	if err != nil {
		t.Fatal(err)
	}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	proxy = newLossyProxy(t, apiSrv.URL)
	proxySrv := httptest.NewUnstartedServer(proxy)
	// A new connection for every request: Chromium sends a request again
	// by itself when a connection that it reused closes without an
	// answer, and then the page would not see the loss.
	proxySrv.Config.SetKeepAlivesEnabled(false)
	proxySrv.Start()
	t.Cleanup(proxySrv.Close)
	t.Cleanup(proxy.releaseHeld) // before Close, which waits for a held request
	pageSrv.Config.Handler = newPage(proxySrv.URL)
	pageSrv.Start()
	t.Cleanup(pageSrv.Close)
	return pageSrv.URL, proxy
}

// findChromium returns the path of a Chromium or Chrome, or skips the test.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no Chromium found (chromium, chromium-browser or google-chrome on PATH): install Debian's chromium package, or run scripts/test, which installs it")
	return ""
}

// startBrowser starts a headless Chromium, with a new profile and none of
// its own connections to the network, and returns the context of its tab,
// which ends after browserTimeout.
func startBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	parent, cancelParent := context.WithTimeout(context.Background(), browserTimeout)
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, // the suite may run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	// Before the profile's directory is removed: the browser is gone then.
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelParent()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// pageStatus returns what the page's status line says, for a failure's
// message.
func pageStatus(t *testing.T, ctx context.Context) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	return s
}

// lossyProxy stands between the page and the API. It passes every request
// on, except the first POSTs, which go to the handlers of its plan in turn:
// loseAnswer, hold, or an answer of the test's own.
type lossyProxy struct {
	t         *testing.T
	api       *url.URL
	forward   *httputil.ReverseProxy
	transport *http.Transport

	lost    chan struct{} // closed when the first answer is lost
	held    chan struct{} // closed when the second POST is held
	release chan struct{} // closed when the test ends

	plan []http.HandlerFunc // set before the first POST

	mu         sync.Mutex
	keys       []string    // the Idempotency-Key of each POST, in order
	times      []time.Time // when each POST came
	lostStatus int
	lostBody   []byte
}

func newLossyProxy(t *testing.T, apiURL string) *lossyProxy {
	api, err := url.Parse(apiURL)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	forward := httputil.NewSingleHostReverseProxy(api)
	forward.Transport = transport
	return &lossyProxy{
		t: t, api: api, forward: forward, transport: transport,
		lost: make(chan struct{}), held: make(chan struct{}), release: make(chan struct{}),
	}
}

func (p *lossyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		p.forward.ServeHTTP(w, r) // the preflights
		return
	}
	p.mu.Lock()
	p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
	p.times = append(p.times, time.Now())
	n := len(p.keys)
	p.mu.Unlock()
	if n <= len(p.plan) {
		p.plan[n-1](w, r)
		return
	}
	p.forward.ServeHTTP(w, r)
}

// hold forwards nothing and answers nothing until the browser gives the
// request up, as it does on a reload, or the test ends.
func (p *lossyProxy) hold(w http.ResponseWriter, r *http.Request) {
	close(p.held)
	select {
	case <-r.Context().Done():
	case <-p.release:
	}
	hangUp(p.t, w)
}

// loseAnswer sends r to the API, reads its whole answer, so that the
// payment is committed, and hangs up without a byte of it.
func (p *lossyProxy) loseAnswer(w http.ResponseWriter, r *http.Request) {
	defer close(p.lost)
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = p.api.Scheme, p.api.Host, p.api.Host
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.t.Errorf("the first POST: %v", err)
		hangUp(p.t, w)
		return
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		p.t.Errorf("the first answer: %v", err)
	}
	p.mu.Lock()
	p.lostStatus, p.lostBody = resp.StatusCode, body
	p.mu.Unlock()
	hangUp(p.t, w)
}

// hangUp closes the client's connection without an answer.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hanging up: %v", err)
		return
	}
	_ = conn.Close()
}

func (p *lossyProxy) releaseHeld() { close(p.release) }

// seen returns the keys of the POSTs and when they came, and the answer
// that was lost.
func (p *lossyProxy) seen() (keys []string, times []time.Time, lostStatus int, lostBody []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.keys), slices.Clone(p.times), p.lostStatus, slices.Clone(p.lostBody)
}
