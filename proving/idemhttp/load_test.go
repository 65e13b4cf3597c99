package idemhttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/dialect"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/proving/dbtest"
)

// The shape of TestLoadWithDuplicates.
const (
	loadRequests      = 20000 // requests sent by the clients, each until it gets a final answer
	loadShortRequests = 2000  // the same with -short
	loadClients       = 64    // concurrent clients
	loadRetryPercent  = 30    // requests that repeat an earlier request's key and body
	loadDropPercent   = 5     // responses the server handles in full and then never sends
	loadMaxAttempts   = 100   // attempts per request before the test gives up on it

	// envLoadRequests, when set, replaces the number of requests.
	envLoadRequests = "IDEM_LOAD_REQUESTS"
)

// TestLoadWithDuplicates sends requests through the middleware over real
// TCP from many clients at once. Some are retries of earlier requests, some
// of them sent while the original is still running, and the server drops a
// share of its responses after it has handled them in full, so that the
// client has to try again. Each client tries a request again with the same
// key and body, after a transport error, a 409 or a 5xx, until it gets a
// final answer. Then every key must have exactly one effect, every answer
// for a key must be the stored response byte for byte, and every request
// must have ended with its 2xx. Half the requests go through a store of
// idem.LookupAlways on the same table, the other half through one of
// idem.LookupNever. -short sends 2,000 requests instead of 20,000, and
// IDEM_LOAD_REQUESTS any number.
func TestLoadWithDuplicates(t *testing.T) {
	n := loadRequests
	if testing.Short() {
		n = loadShortRequests
	}
	if v := os.Getenv(envLoadRequests); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of requests", envLoadRequests, v)
		}
	}
	// TiDB too, in both transaction modes: the load shows the MySQL
	// dialect's contract there.
	for _, tg := range append(loadTargets(), dbtest.TiDBTargets()...) {
		t.Run(tg.Name, func(t *testing.T) { runLoad(t, tg, n) })
	}
	dbtest.SkipMissing(t)
	dbtest.SkipMissingTiDB(t)
}

// loadTargets is targets() with one PostgreSQL driver rather than two, since
// the load is about the database and the drivers are compared elsewhere, and
// with SQLite in WAL mode.
func loadTargets() []target {
	var ts []target
	for _, tg := range targets() {
		switch tg.Name {
		case "postgres/pq":
			continue
		case "sqlite":
			// In its default rollback journal, SQLite syncs the disk
			// several times per commit, and the run measures the disk.
			// WAL with synchronous=NORMAL, as a server would run it,
			// syncs at checkpoints.
			tg = dbtest.SQLite(sqliteParams + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
		}
		ts = append(ts, tg)
	}
	return ts
}

// loadJob is one request a client sends until it has a final answer.
type loadJob struct {
	key, body string
	retry     bool // a key sent before, by this or another client
}

// loadPlan returns n requests, pct percent of which repeat an earlier
// request. Half of the repeats take one of the last few keys, which is
// usually still being handled when the repeat goes out.
func loadPlan(n, pct int, prefix string) []loadJob {
	jobs := make([]loadJob, 0, n)
	var fresh []loadJob
	for i := 0; i < n; i++ {
		if len(fresh) > 0 && rand.N(100) < pct {
			var j loadJob
			if recent := min(len(fresh), 16); rand.N(2) == 0 {
				j = fresh[len(fresh)-1-rand.N(recent)]
			} else {
				j = fresh[rand.N(len(fresh))]
			}
			j.retry = true
			jobs = append(jobs, j)
			continue
		}
		j := loadJob{
			key:  fmt.Sprintf("%s-%06d", prefix, len(fresh)),
			body: fmt.Sprintf(`{"item":%d,"pad":%q}`, i, strings.Repeat("x", rand.N(64))),
		}
		fresh = append(fresh, j)
		jobs = append(jobs, j)
	}
	return jobs
}

// loadStats counts what happened during a load run.
type loadStats struct {
	attempts, clientErrors, dropped, runs atomic.Int64
	replays, ran                          atomic.Int64
	inFlight, conflict, internal, other   atomic.Int64
	overlapping                           atomic.Int64 // attempts sent while another with the same key was out
}

// loadAnswer is a final answer a client got for a key.
type loadAnswer struct {
	status      int
	body        []byte
	contentType string
	location    string
	replayed    bool
}

func runLoad(t *testing.T, tg target, n int) {
	// The test's own store never reads first: with about a third of the
	// requests retries, a store of the default policy would read first now
	// and then, and the claims it races against the other store's reads
	// would come and go.
	e := setup(t, tg, idem.WithLookupFirst(idem.LookupNever))
	// Size the pool for the clients. SQLite writes one transaction at a
	// time whatever the pool; with one connection the requests queue in
	// database/sql, and the busy timeout never runs out however slow the
	// run is under the race detector.
	if dialect.CapabilitiesOf(tg.Dialect).OneWriter {
		e.DB.SetMaxOpenConns(1)
	} else {
		e.DB.SetMaxOpenConns(loadClients / 2)
	}
	var (
		st   loadStats
		h    hook
		plan = loadPlan(n, loadRetryPercent, "load")
	)
	// Half the requests, at random, go through a store of
	// idem.LookupAlways on the same table, so that its reads race the other
	// store's claims.
	lookupFirst, err := idem.New(tg.Dialect, idem.WithTable(e.Table), idem.WithLookupFirst(idem.LookupAlways))
	if err != nil {
		t.Fatal(err)
	}
	plain, first := e.protect(t, h.option()), mustNew(t, lookupFirst, e.DB, idemhttp.WithSingleClient(), h.option()).Handler
	mw := func(next http.Handler) http.Handler {
		a, b := plain(next), first(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rand.N(2) == 0 {
				a.ServeHTTP(w, r)
			} else {
				b.ServeHTTP(w, r)
			}
		})
	}
	handler := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		tx := idemhttp.Tx(r.Context())
		if tx == nil {
			http.Error(w, "not protected", http.StatusInternalServerError)
			return
		}
		if err := e.insert(r.Context(), tx, key); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		run := st.runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/orders/%d", run))
		w.Header().Set("X-Run", strconv.FormatInt(run, 10))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%d,"key":%q,"got":%q}`, run, key, body)
	}))
	srv := start(t, dropSome(handler, loadDropPercent, &st.dropped))

	// Keep-alive connections, enough for every client, so that 20,000
	// requests do not use up the ports of the loopback interface. The
	// Transport resends a request on a kept-alive connection that fails
	// if the request carries an Idempotency-Key and its body can be read
	// again; loadSend makes the body unrewindable, so that every dropped
	// response reaches the client as an error.
	tr := &http.Transport{MaxIdleConns: loadClients, MaxIdleConnsPerHost: loadClients}
	t.Cleanup(tr.CloseIdleConnections)
	// A request waits its turn for a database connection, then a claim
	// waits at most the 1 s lock timeout: with 64 clients at the ~300
	// requests a second of a loaded 2-core machine under -race, a request
	// takes a fifth of a second on average, and the pool hands its free
	// connection to a random waiter, so waiting 30 s in that queue would
	// mean losing thousands of draws in a row. The timeout only turns a
	// request that never gets an answer (a deadlock, a lost wakeup) into a
	// client error, which the test counts against the drops it made.
	cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var (
		mu      sync.Mutex
		out     = map[string]int{} // attempts out now, by key
		answers = map[string][]loadAnswer{}
		failed  []string
	)
	jobs := make(chan loadJob)
	var wg sync.WaitGroup
	begin := time.Now()
	for c := 0; c < loadClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ans, err := loadSend(cl, srv, j, &st, func(delta int) {
					mu.Lock()
					defer mu.Unlock()
					if delta > 0 && out[j.key] > 0 {
						st.overlapping.Add(1)
					}
					out[j.key] += delta
				})
				mu.Lock()
				if err != nil {
					failed = append(failed, fmt.Sprintf("%s: %v", j.key, err))
				} else {
					answers[j.key] = append(answers[j.key], ans)
				}
				mu.Unlock()
			}
		}()
	}
	for _, j := range plan {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(begin) // for the log only: nothing is asserted on it

	retries := 0
	for _, j := range plan {
		if j.retry {
			retries++
		}
	}
	t.Logf("%s: %d requests (%d retries of earlier keys) for %d distinct keys from %d clients in %v (%.0f requests/s)",
		tg.Name, len(plan), retries, len(plan)-retries, loadClients, elapsed.Round(time.Millisecond), float64(len(plan))/elapsed.Seconds())
	t.Logf("%s: %d attempts, %d sent while another attempt with the key was out; %d responses dropped, %d client errors; "+
		"%d answers ran the handler, %d replays; %d 409s, %d 503s, %d 500s, %d other; the handler ran %d times",
		tg.Name, st.attempts.Load(), st.overlapping.Load(), st.dropped.Load(), st.clientErrors.Load(),
		st.ran.Load(), st.replays.Load(), st.inFlight.Load(), st.conflict.Load(), st.internal.Load(), st.other.Load(), st.runs.Load())
	if errs := h.reported(); len(errs) > 0 {
		t.Logf("%s: the ErrorHook was told %d errors, the first: %v", tg.Name, len(errs), errs[0])
	}

	for i, f := range failed {
		if i == 10 {
			t.Errorf("... and %d more requests without a final answer", len(failed)-10)
			break
		}
		t.Errorf("no final answer: %s", f)
	}
	if st.other.Load() != 0 {
		t.Errorf("%d answers were neither 201, 409, 500 nor 503", st.other.Load())
	}
	if d, c := st.dropped.Load(), st.clientErrors.Load(); d != c {
		t.Errorf("%d responses dropped but %d client errors: connections failed that the test did not cut", d, c)
	}
	if st.dropped.Load() == 0 || st.replays.Load() == 0 || st.overlapping.Load() == 0 {
		t.Errorf("the load did not exercise what it is for: %d drops, %d replays, %d overlapping attempts",
			st.dropped.Load(), st.replays.Load(), st.overlapping.Load())
	}
	checkLoad(t, e, plan, answers)
}

// loadSend sends j until it gets a final answer: a 201, or anything else
// that is not worth retrying. out is told when an attempt goes out (+1) and
// when it is back (-1).
func loadSend(cl *http.Client, srv *httptest.Server, j loadJob, st *loadStats, out func(int)) (loadAnswer, error) {
	var last string
	for attempt := 0; attempt < loadMaxAttempts; attempt++ {
		if attempt > 0 {
			// A pause of 1 to 20 ms, as a client backs off; it only
			// spreads the retries out. The 100 attempts are no time
			// bound either: a 409 comes after the 1 s lock timeout, so
			// a request that only meets its own key in flight gives its
			// holder over 100 s to finish, and each of the other
			// answers retried here (a dropped response, a 503 after
			// DoTx's own retries, a 500) is rare enough that 100 in a
			// row do not happen.
			time.Sleep(time.Duration(1+rand.N(min(attempt, 10)*2)) * time.Millisecond)
		}
		req, err := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(j.body))
		if err != nil {
			return loadAnswer{}, err
		}
		req.GetBody = nil // see runLoad: no resend by the Transport
		req.Header.Set("Idempotency-Key", j.key)
		st.attempts.Add(1)
		out(+1)
		resp, err := cl.Do(req)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		out(-1)
		if err != nil {
			st.clientErrors.Add(1)
			last = err.Error()
			continue
		}
		ans := loadAnswer{
			status:      resp.StatusCode,
			body:        body,
			contentType: resp.Header.Get("Content-Type"),
			location:    resp.Header.Get("Location"),
			replayed:    resp.Header.Get(idemhttp.ReplayedHeader) == "true",
		}
		switch resp.StatusCode {
		case http.StatusCreated:
			ran := resp.Header.Get("X-Run") != ""
			if ran == ans.replayed {
				return ans, fmt.Errorf("a 201 with X-Run %q and %s %q: it must be either a run or a replay",
					resp.Header.Get("X-Run"), idemhttp.ReplayedHeader, resp.Header.Get(idemhttp.ReplayedHeader))
			}
			if ans.replayed {
				st.replays.Add(1)
			} else {
				st.ran.Add(1)
			}
			return ans, nil
		case http.StatusConflict:
			st.inFlight.Add(1)
		case http.StatusServiceUnavailable:
			st.conflict.Add(1)
		case http.StatusInternalServerError:
			st.internal.Add(1)
		default:
			st.other.Add(1)
			return ans, fmt.Errorf("answer %d %s", resp.StatusCode, body)
		}
		last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
	}
	return loadAnswer{}, fmt.Errorf("%d attempts, the last: %s", loadMaxAttempts, last)
}

// checkLoad compares what the clients got with what the database holds.
func checkLoad(t *testing.T, e *env, plan []loadJob, answers map[string][]loadAnswer) {
	t.Helper()
	ctx := context.Background()
	keys := map[string]bool{}
	for _, j := range plan {
		keys[j.key] = true
	}

	effects := map[string]int{}
	rows, err := e.DB.QueryContext(ctx, "SELECT note, count(*) FROM "+e.Effects.Table+" GROUP BY note")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for rows.Next() {
		var (
			note string
			n    int
		)
		if err := rows.Scan(&note, &n); err != nil {
			t.Fatal(err)
		}
		effects[note] = n
		total += n
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if total != len(keys) || len(effects) != len(keys) {
		t.Errorf("%d effect rows over %d keys; want %d, one per key", total, len(effects), len(keys))
	}

	bad := 0
	fail := func(format string, args ...any) {
		t.Helper()
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for key := range keys {
		if n := effects[key]; n != 1 {
			fail("key %s has %d effect rows, want 1", key, n)
		}
		res, err := e.Store.Lookup(ctx, e.DB, idemhttp.StoredKey("", key))
		if err != nil || res.Outcome != idem.Replay {
			fail("Lookup(%s) = %v, %v; want its stored response", key, res.Outcome, err)
			continue
		}
		stored := res.Response
		ran := 0
		as := answers[key]
		for i, a := range as {
			if !a.replayed {
				ran++
			}
			if a.status != stored.Status || !bytes.Equal(a.body, stored.Body) {
				fail("key %s, answer %d: %d %s; the stored response is %d %s", key, i, a.status, a.body, stored.Status, stored.Body)
			}
			if a.contentType != stored.Header.Get("Content-Type") || a.location != stored.Header.Get("Location") {
				fail("key %s, answer %d: Content-Type %q, Location %q; stored %q, %q",
					key, i, a.contentType, a.location, stored.Header.Get("Content-Type"), stored.Header.Get("Location"))
			}
			if a.status != as[0].status || !bytes.Equal(a.body, as[0].body) {
				fail("key %s, answer %d differs from the first: %d %s, then %d %s", key, i, as[0].status, as[0].body, a.status, a.body)
			}
		}
		if ran > 1 {
			fail("key %s: %d answers ran the handler, want at most 1", key, ran)
		}
	}
	if bad > 10 {
		t.Errorf("... %d failures in all", bad)
	}
}

// dropSome wraps h so that pct percent of the requests are handled in full,
// into a recorder, and their connection is then cut before a byte of the
// response leaves: the effect is committed, and the client sees an error.
func dropSome(h http.Handler, pct int, dropped *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rand.N(100) >= pct {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(fmt.Sprintf("hijack: %v", err)) // the test server's writer can hijack
		}
		dropped.Add(1)
		conn.Close()
	})
}
