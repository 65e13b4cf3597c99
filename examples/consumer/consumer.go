package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
)

const (
	// defaultRetryDelay is how long a message that could not be applied
	// (the database failed, or another delivery holds its key) waits
	// before JetStream delivers it again.
	defaultRetryDelay = time.Second

	// handleTimeout bounds the work on one message.
	handleTimeout = time.Minute
)

// ordersSchema is the consumer's effect. message_id tells which message
// placed an order; it is deliberately not UNIQUE: the effect of a message is
// often more than one insert (stock, ledger, outbox), which no single
// constraint covers, and the key's record is what keeps it to one.
const ordersSchema = `CREATE TABLE IF NOT EXISTS orders (
	id         INTEGER PRIMARY KEY,
	message_id TEXT NOT NULL,
	customer   TEXT NOT NULL,
	item       TEXT NOT NULL,
	quantity   INTEGER NOT NULL
)`

// order is a message's payload.
type order struct {
	Customer string `json:"customer"`
	Item     string `json:"item"`
	Quantity int    `json:"quantity"`
}

// errBadMessage marks a message that no redelivery can make applicable.
var errBadMessage = errors.New("unusable message")

func parseOrder(data []byte) (order, error) {
	var o order
	if err := json.Unmarshal(data, &o); err != nil {
		return o, fmt.Errorf("%w: payload is not an order: %w", errBadMessage, err)
	}
	if o.Customer == "" || o.Item == "" || o.Quantity <= 0 {
		return o, fmt.Errorf("%w: an order needs a customer, an item and a positive quantity", errBadMessage)
	}
	return o, nil
}

// consumerConfig configures consume.
type consumerConfig struct {
	NATSURL string
	DBPath  string
	Log     *slog.Logger
	// AckWait is the durable consumer's ack wait; zero means defaultAckWait.
	AckWait time.Duration
	// RetryDelay is the delay of a nak; zero means defaultRetryDelay.
	RetryDelay time.Duration
	// BeforeAck, if set, runs for each message after DoTx has returned
	// and before the message is acked, naked or termed. The tests use it
	// to kill the process at that point; a real consumer leaves it nil.
	BeforeAck func(id string, res idem.Result, err error)
}

// openDB opens the SQLite database as idem asks: _txlock=immediate makes
// each transaction take the write lock when it begins, and the busy timeout
// makes it wait for the lock instead of failing at once.
func openDB(path string) (*sql.DB, error) {
	return sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)")
}

// consume applies the queue's messages to the database until ctx is done.
func consume(ctx context.Context, cfg consumerConfig) error {
	if cfg.AckWait == 0 {
		cfg.AckWait = defaultAckWait
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = defaultRetryDelay
	}
	db, err := openDB(cfg.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := idem.New(idem.SQLite(), idem.WithRetention(keep))
	if err != nil {
		return err
	}
	if err := store.Migrate(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, ordersSchema); err != nil {
		return err
	}

	nc, err := nats.Connect(cfg.NATSURL, nats.Name("orders consumer"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := ensureStream(ctx, js); err != nil {
		return err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, streamName, newConsumerConfig(cfg.AckWait))
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(pullBatch))
	if err != nil {
		return err
	}
	defer it.Stop()
	defer context.AfterFunc(ctx, it.Stop)()

	h := &handler{db: db, store: store, log: cfg.Log, retryDelay: cfg.RetryDelay, beforeAck: cfg.BeforeAck}
	cfg.Log.Info("consuming", "stream", streamName, "consumer", durableName, "db", cfg.DBPath)
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			if ctx.Err() != nil {
				return nil // stopped: messages left in the buffer are delivered again
			}
			return err
		}
		if err != nil {
			cfg.Log.Warn("pull", "err", err) // a missed heartbeat: the iterator goes on
			continue
		}
		// The message in hand is seen through even when ctx is done, so
		// that a stop does not turn a commit into an error.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleTimeout)
		h.handle(mctx, msg)
		cancel()
	}
}

type handler struct {
	db         *sql.DB
	store      *idem.Store
	log        *slog.Logger
	retryDelay time.Duration
	beforeAck  func(id string, res idem.Result, err error)
}

// handle applies one message and tells the broker how it went.
func (h *handler) handle(ctx context.Context, msg jetstream.Msg) {
	id := msg.Headers().Get(jetstream.MsgIDHeader)
	log := h.log.With("id", id)
	if meta, err := msg.Metadata(); err == nil {
		log = log.With("seq", meta.Sequence.Stream, "delivered", meta.NumDelivered)
	}
	res, err := h.apply(ctx, id, msg)
	if h.beforeAck != nil {
		h.beforeAck(id, res, err)
	}
	v := settle(res, err)
	attrs := []any{"outcome", v.outcome, "action", v.action}
	if err != nil && v.action != term { // a term's reason says it already
		attrs = append(attrs, "err", err)
	}
	if len(res.Response.Body) > 0 {
		attrs = append(attrs, "response", string(res.Response.Body))
	}
	var aerr error
	switch v.action {
	case ack:
		// DoubleAck waits for the broker to confirm. A plain Ack would do
		// too: an ack that is lost means one more delivery, which the key
		// answers with Replay.
		aerr = msg.DoubleAck(ctx)
	case nak:
		aerr = msg.NakWithDelay(h.retryDelay)
	case term:
		aerr = msg.TermWithReason(v.why)
	}
	if aerr != nil {
		log.Warn(string(v.action)+" failed: the message will be delivered again", append(attrs, "ack_err", aerr)...)
		return
	}
	log.Log(ctx, v.level, v.why, attrs...)
}

// apply runs the message's effect under its key: the message's own id,
// within this stream, and a hash of its subject and payload.
func (h *handler) apply(ctx context.Context, id string, msg jetstream.Msg) (idem.Result, error) {
	if id == "" {
		return idem.Result{}, fmt.Errorf("%w: no %s header, so no key to apply it once", errBadMessage, jetstream.MsgIDHeader)
	}
	o, err := parseOrder(msg.Data())
	if err != nil {
		return idem.Result{}, err
	}
	key := streamName + ":" + id
	hash := idem.Fingerprint([]byte(msg.Subject()), msg.Data())
	return h.store.DoTx(ctx, h.db, nil, key, hash, func(ctx context.Context, tx *sql.Tx) (idem.Response, error) {
		r, err := tx.ExecContext(ctx, `INSERT INTO orders (message_id, customer, item, quantity) VALUES (?, ?, ?, ?)`,
			id, o.Customer, o.Item, o.Quantity)
		if err != nil {
			return idem.Response{}, err
		}
		n, err := r.LastInsertId()
		if err != nil {
			return idem.Response{}, err
		}
		// Stored with the key: a later delivery is told which order its
		// message placed.
		return idem.Response{Body: fmt.Appendf(nil, `{"order":%d}`, n)}, nil
	})
}

// action is what the consumer tells the broker about a message.
type action string

const (
	ack  action = "ack"  // done: delete it
	nak  action = "nak"  // not done: deliver it again after a delay
	term action = "term" // never deliver it again
)

type verdict struct {
	outcome string // DoTx's outcome, or "error"
	action  action
	level   slog.Level
	why     string
}

// settle decides what to tell the broker once DoTx has answered.
func settle(res idem.Result, err error) verdict {
	switch {
	case errors.Is(err, errBadMessage), errors.Is(err, idem.ErrInvalidKey):
		return verdict{"error", term, slog.LevelError, "terminated: " + err.Error()}
	case err != nil:
		// The database failed, a conflict outlasted DoTx's retries, or
		// the commit's outcome is unknown: nothing is known to be done,
		// and a redelivery either applies the message or replays it.
		return verdict{"error", nak, slog.LevelWarn, "not applied, delivered again later"}
	}
	switch res.Outcome {
	case idem.Claimed:
		return verdict{"claimed", ack, slog.LevelInfo, "order placed"}
	case idem.Replay:
		return verdict{"replay", ack, slog.LevelInfo, "already applied by an earlier delivery, not applied again"}
	case idem.Mismatch:
		return verdict{"mismatch", term, slog.LevelError, "poisoned message, terminated: its id was used before for a different message"}
	case idem.InFlight:
		return verdict{"in_flight", nak, slog.LevelWarn, "another delivery of this message holds its key, delivered again later"}
	}
	return verdict{"error", nak, slog.LevelError, fmt.Sprintf("unknown outcome %v, delivered again later", res.Outcome)}
}
