package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/idemgo/idem"
)

// Call is one call that the provider took, as the history records it:
// the call key it deduplicates by, and the record that the caller says
// it serves.
type Call struct {
	CallKey string `json:"call_key"`
	Key     []byte `json:"key"`
	Shard   int64  `json:"shard"`
	Inc     int64  `json:"inc"`
	Charge  string `json:"charge"`
	New     bool   `json:"new"`            // this call made the charge
	Lost    bool   `json:"lost,omitempty"` // its answer was lost
}

// provider is the payment provider of the checkout, on loopback, in the
// campaign's own process, so that it outlives the services it kills: it
// charges once per call key, answers a repeated call with the charge it
// made, and records every call.
type provider struct {
	srv    *http.Server
	url    string
	record func(Call)

	mu      sync.Mutex
	charges map[string]string
	// Until failUntil, calls fail without charging; until loseUntil,
	// they charge and lose their answers.
	failUntil, loseUntil time.Time
}

func startProvider(record func(Call)) (*provider, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &provider{record: record, charges: map[string]string{}, url: "http://" + ln.Addr().String()}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *provider) close() { p.srv.Close() }

// strike makes the provider fail its calls for d ("fail": 503, without
// charging), or charge them and lose their answers ("lose"): an outage
// that leaves every checkout that calls meanwhile unfinished.
func (p *provider) strike(how string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if how == "fail" {
		p.failUntil = time.Now().Add(d)
	} else {
		p.loseUntil = time.Now().Add(d)
	}
}

// calm ends the provider's outage, if there is one.
func (p *provider) calm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failUntil, p.loseUntil = time.Time{}, time.Time{}
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var c Call
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.CallKey = r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	now := time.Now()
	if now.Before(p.failUntil) {
		p.mu.Unlock()
		http.Error(w, "the provider is unavailable", http.StatusServiceUnavailable)
		return
	}
	id, ok := p.charges[c.CallKey]
	if !ok {
		id = fmt.Sprintf("ch_%d", len(p.charges)+1)
		p.charges[c.CallKey] = id
	}
	c.Charge, c.New = id, !ok
	c.Lost = now.Before(p.loseUntil)
	p.record(c)
	p.mu.Unlock()
	if c.Lost {
		http.Error(w, "the provider's answer was lost", http.StatusBadGateway)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

// charge calls the provider at url for the record id, with callKey.
func charge(ctx context.Context, url, callKey string, id idem.Identity) error {
	shard, _ := id.Shard.(int64)
	body, _ := json.Marshal(Call{Key: []byte(id.Key), Shard: shard, Inc: id.Incarnation})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", callKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("provider: %s", strconv.Itoa(resp.StatusCode))
	}
	return nil
}
