package idemgrpc

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
)

// method is a protected method: its full name, and the type of its reply,
// in which a stored reply is decoded.
type method struct {
	name  string
	reply protoreflect.MessageType
}

// resolve finds the unary method fullMethod ("/package.Service/Method") in
// protoregistry.GlobalFiles, and the Go type of its reply in
// protoregistry.GlobalTypes. A reply type that has no Go type there (a
// descriptor registered without generated code) is made with dynamicpb.
func resolve(fullMethod string) (*method, error) {
	svc, name, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !strings.HasPrefix(fullMethod, "/") || !ok || svc == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("idemgrpc: method %q is not a full method name, /package.Service/Method", fullMethod)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, fmt.Errorf("idemgrpc: method %s: service %s is not registered in protoregistry.GlobalFiles: %w", fullMethod, svc, err)
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("idemgrpc: method %s: %s is not a service", fullMethod, svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("idemgrpc: method %s: service %s has no method %s", fullMethod, svc, name)
	}
	if md.IsStreamingClient() || md.IsStreamingServer() {
		return nil, fmt.Errorf("idemgrpc: method %s streams: a unary interceptor cannot protect it", fullMethod)
	}
	out := md.Output()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(out.FullName())
	switch {
	case errors.Is(err, protoregistry.NotFound):
		mt = dynamicpb.NewMessageType(out)
	case err != nil:
		return nil, fmt.Errorf("idemgrpc: method %s: reply type %s: %w", fullMethod, out.FullName(), err)
	case mt.Descriptor().FullName() != out.FullName():
		return nil, fmt.Errorf("idemgrpc: method %s: the registry's type %s is not the reply type %s", fullMethod, mt.Descriptor().FullName(), out.FullName())
	}
	return &method{name: fullMethod, reply: mt}, nil
}
