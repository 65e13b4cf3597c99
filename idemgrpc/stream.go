package idemgrpc

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// capture is the ServerTransportStream that a handler sees in one attempt:
// it keeps the header and trailer metadata that the handler sets, so that
// only the attempt whose answer the client gets passes its metadata on, and
// a header sent early cannot leave before the transaction ends.
type capture struct {
	method string

	mu              sync.Mutex
	header, trailer metadata.MD
}

var _ grpc.ServerTransportStream = (*capture)(nil)

func newCapture(method string) *capture { return &capture{method: method} }

func (c *capture) Method() string { return c.method }

func (c *capture) SetHeader(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = metadata.Join(c.header, md)
	return nil
}

// SendHeader keeps md with the header, which leaves with the reply.
func (c *capture) SendHeader(md metadata.MD) error { return c.SetHeader(md) }

func (c *capture) SetTrailer(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trailer = metadata.Join(c.trailer, md)
	return nil
}

// forward passes the metadata the handler set on to the call's own stream,
// if there is one. An error means the header was sent already, which
// nothing in the interceptor does before the handler has returned.
func (c *capture) forward(stream grpc.ServerTransportStream) error {
	if stream == nil {
		return nil
	}
	c.mu.Lock()
	header, trailer := c.header, c.trailer
	c.mu.Unlock()
	if header.Len() > 0 {
		if err := stream.SetHeader(header); err != nil {
			return err
		}
	}
	if trailer.Len() > 0 {
		return stream.SetTrailer(trailer)
	}
	return nil
}
