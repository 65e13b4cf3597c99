package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The queue: a work-queue stream of orders, read by one durable consumer.
const (
	streamName  = "ORDERS"
	subject     = "orders.new"
	durableName = "order-writer"

	// keep is how long the stream keeps a message that no one acknowledged,
	// and how long idem keeps a key (WithRetention in consume). Every
	// delivery of a stored message happens within keep of its publication,
	// and the record of its key is made at its first delivery, so the
	// record outlives every redelivery. See docs/consumers.md.
	keep = 24 * time.Hour

	// defaultAckWait is how long JetStream waits for an ack before it
	// delivers a message again. It counts from the delivery to the client,
	// time spent in the client's buffer included.
	defaultAckWait = 30 * time.Second

	// pullBatch bounds how many messages the client holds unprocessed, so
	// that none waits in its buffer until its ack wait runs out.
	pullBatch = 16
)

// newStreamConfig is the stream the publishers write to. JetStream drops a
// second publication with the same Nats-Msg-Id within Duplicates (two
// minutes by default); that protects the stream from a publisher's retries,
// not the database from a consumer's.
func newStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      streamName,
		Subjects:  []string{"orders.>"},
		Retention: jetstream.WorkQueuePolicy, // an acked message is deleted
		Storage:   jetstream.FileStorage,
		MaxAge:    keep,
	}
}

// newConsumerConfig is the durable pull consumer that the consumer process
// reads through: every message must be acked one by one, and one that is
// not acked within ackWait is delivered again, without limit.
func newConsumerConfig(ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       durableName,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    -1,
		FilterSubject: subject,
	}
}

// ensureStream creates the stream if it is missing, and leaves an existing
// one as it is: the stream belongs to whoever runs the broker.
func ensureStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.Stream(ctx, streamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, newStreamConfig())
	}
	return err
}

// publish sends an order with its id in the Nats-Msg-Id header, which is
// both the stream's publish deduplication id and the consumer's
// idempotency key.
func publish(ctx context.Context, js jetstream.JetStream, id string, payload []byte) (*jetstream.PubAck, error) {
	return js.Publish(ctx, subject, payload, jetstream.WithMsgID(id))
}

// publishOnce connects, makes sure the stream exists, and publishes.
func publishOnce(ctx context.Context, url, id string, payload []byte) (*jetstream.PubAck, error) {
	nc, err := nats.Connect(url, nats.Name("orders publisher"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if err := ensureStream(ctx, js); err != nil {
		return nil, err
	}
	return publish(ctx, js, id, payload)
}

// startServer starts NATS with JetStream, its data in storeDir, listening on
// host:port (port -1 picks a free one).
func startServer(host string, port int, storeDir string) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		Host:      host,
		Port:      port,
		JetStream: true,
		StoreDir:  storeDir,
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, err
	}
	ns.Start()
	// A few milliseconds, even on a loaded machine; the bound only turns
	// a server that never starts into an error.
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("the NATS server did not start")
	}
	return ns, nil
}

// serve runs the server until ctx is done.
func serve(ctx context.Context, listen, storeDir string) error {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("port: %w", err)
	}
	if storeDir == "" {
		if storeDir, err = os.MkdirTemp("", "orders-jetstream"); err != nil {
			return err
		}
		defer os.RemoveAll(storeDir)
	}
	ns, err := startServer(host, port, storeDir)
	if err != nil {
		return err
	}
	fmt.Printf("NATS with JetStream on %s, data in %s; Ctrl-C stops it\n", ns.ClientURL(), storeDir)
	<-ctx.Done()
	ns.Shutdown()
	ns.WaitForShutdown()
	return nil
}
