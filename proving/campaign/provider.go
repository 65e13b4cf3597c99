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
	fail    int // calls to refuse without charging
	lose    int // calls to charge, then lose the answer of
}

// providerFaultCalls is how many calls a provider fault strikes.
const providerFaultCalls = 3

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

// strike makes the provider fail its next calls ("fail": 503, without
// charging) or charge them and lose their answers ("lose").
func (p *provider) strike(how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if how == "fail" {
		p.fail += providerFaultCalls
	} else {
		p.lose += providerFaultCalls
	}
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	var c Call
	if err := json.NewDecoder(r.Body).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.CallKey = r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	if p.fail > 0 {
		p.fail--
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
	c.Lost = p.lose > 0
	if c.Lost {
		p.lose--
	}
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
