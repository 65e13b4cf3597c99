package codec

import (
	"bytes"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []http.Header{
		{"Content-Type": {"application/json"}},
		{"A": {""}, "B": {"1", "2", ""}, "C": {}},
		{"": {"empty name"}, "X-Bytes": {"\x00\xff\n"}},
	} {
		got, err := DecodeHeader(EncodeHeader(h))
		if err != nil || !reflect.DeepEqual(got, h) {
			t.Errorf("round trip of %v = %v, %v", h, got, err)
		}
	}
	for _, h := range []http.Header{nil, {}} {
		if b := EncodeHeader(h); len(b) != 0 {
			t.Errorf("EncodeHeader(%#v) = %q, want no bytes", h, b)
		}
	}
	if h, err := DecodeHeader(nil); h != nil || err != nil {
		t.Errorf("DecodeHeader(nil) = %v, %v", h, err)
	}
}

// TestHeaderSize checks HeaderSize against the encoding itself, with
// lengths and counts on both sides of each varint byte boundary.
func TestHeaderSize(t *testing.T) {
	many := make([]string, 130)
	for _, h := range []http.Header{
		nil,
		{},
		{"Content-Type": {"application/json"}},
		{"A": {""}, "B": {"1", "2", ""}, "C": {}},
		{strings.Repeat("n", 127): {strings.Repeat("v", 128)}},
		{"Big": {strings.Repeat("v", 16383), strings.Repeat("w", 16384)}, "Many": many},
	} {
		if got, want := HeaderSize(h), len(EncodeHeader(h)); got != want {
			t.Errorf("HeaderSize = %d, want len(EncodeHeader) = %d", got, want)
		}
	}
}

func TestHeaderEncodingIsCanonical(t *testing.T) {
	a := http.Header{"A": {"1"}, "B": {"2"}, "C": {"3"}}
	b := http.Header{"C": {"3"}, "B": {"2"}, "A": {"1"}}
	for i := 0; i < 20; i++ {
		if !bytes.Equal(EncodeHeader(a), EncodeHeader(b)) {
			t.Fatal("the encoding depends on map order")
		}
	}
}

func TestDecodeHeaderRejectsMalformed(t *testing.T) {
	good := EncodeHeader(http.Header{"A": {"1"}, "B": {"2"}})
	for name, b := range map[string][]byte{
		"version":        append([]byte{9}, good[1:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"huge count":     {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge length":    {1, 1, 0xff, 0xff, 0x03},
		"out of order":   EncodeHeaderUnsorted(),
		"duplicate name": {1, 2, 1, 'A', 0, 1, 'A', 0},
	} {
		if _, err := DecodeHeader(b); err == nil {
			t.Errorf("%s: DecodeHeader(%q) accepted it", name, b)
		}
	}
}

// EncodeHeaderUnsorted writes names B then A, which EncodeHeader never does.
func EncodeHeaderUnsorted() []byte {
	return []byte{1, 2, 1, 'B', 0, 1, 'A', 0}
}

func TestChecksumCoversEveryPart(t *testing.T) {
	base := Checksum([]byte("k"), []byte("h"), 200, []byte("hd"), []byte("body"))
	for name, sum := range map[string][32]byte{
		"key":     Checksum([]byte("k2"), []byte("h"), 200, []byte("hd"), []byte("body")),
		"hash":    Checksum([]byte("k"), []byte("h2"), 200, []byte("hd"), []byte("body")),
		"status":  Checksum([]byte("k"), []byte("h"), 201, []byte("hd"), []byte("body")),
		"header":  Checksum([]byte("k"), []byte("h"), 200, []byte("hd2"), []byte("body")),
		"body":    Checksum([]byte("k"), []byte("h"), 200, []byte("hd"), []byte("body2")),
		"framing": Checksum([]byte("k"), []byte("h"), 200, []byte("hdb"), []byte("ody")),
	} {
		if sum == base {
			t.Errorf("changing the %s leaves the checksum alone", name)
		}
	}
}

// FuzzDecodeHeader checks that any input either fails or decodes to a header
// that encodes back to the same bytes, and never panics.
func FuzzDecodeHeader(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeHeader(http.Header{"Content-Type": {"text/plain"}, "X": {"", "y"}}))
	f.Add([]byte{1, 1, 1, 'A', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		if again := EncodeHeader(h); !bytes.Equal(again, b) && len(b) != 0 {
			t.Fatalf("DecodeHeader(%q) = %v, which encodes as %q", b, h, again)
		}
	})
}
