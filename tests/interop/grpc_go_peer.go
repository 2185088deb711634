// grpc_go_peer.go: a grpc-go client (Debian's golang-google-grpc-dev) against agentic's gRPC
// server (`agentic-grpctest serve`), for tests/integration/test_grpc_interop_go. grpc-go is a
// second independent peer beside python3-grpcio: it Huffman-codes its headers and keeps its
// own flow control. Messages are coded by hand with protowire and sent through a raw codec,
// so no generated code is needed for the Test service. Prints TAP.
//
// usage: grpc_go_peer SOCKET
package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
)

const mib = 1024 * 1024

// rawCodec passes already-encoded messages through; its name makes the content-type
// application/grpc+proto, as a generated client's would be.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// agentic.test.v1.Msg{data: 1, seq: 2} and StreamRequest{count: 1, size: 2}
func msg(data []byte, seq uint64) []byte {
	var b []byte
	if len(data) > 0 {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, data)
	}
	if seq != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, seq)
	}
	return b
}

func streamRequest(count, size uint32) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(count))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(size))
	return b
}

func parseMsg(b []byte) (data []byte, seq uint64, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		case num == 2 && typ == protowire.VarintType:
			seq, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, 0, protowire.ParseError(n)
		}
		b = b[n:]
	}
	return data, seq, nil
}

var nTest, failed int

func report(ok bool, name string, why error) {
	nTest++
	if ok {
		fmt.Printf("ok %d - %s\n", nTest, name)
		return
	}
	failed++
	fmt.Printf("not ok %d - %s\n", nTest, name)
	for _, l := range strings.Split(fmt.Sprint(why), "\n") {
		fmt.Printf("# %s\n", l)
	}
}

func check(name string, fn func() error) {
	err := fn()
	report(err == nil, name, err)
}

func wantCode(err error, code codes.Code) error {
	if err == nil {
		return fmt.Errorf("no error, wanted %v", code)
	}
	if s := status.Convert(err); s.Code() != code {
		return fmt.Errorf("status %v (%q), wanted %v", s.Code(), s.Message(), code)
	}
	return nil
}

const svc = "/agentic.test.v1.Test/"

var (
	serverStream = &grpc.StreamDesc{StreamName: "ServerStream", ServerStreams: true}
	bidiStream   = &grpc.StreamDesc{StreamName: "Bidi", ServerStreams: true,
		ClientStreams: true}
	pattern = func() []byte {
		p := make([]byte, 8*mib)
		for i := range p {
			p[i] = byte(i*7 + i>>9)
		}
		return p
	}()
)

func unary(cc *grpc.ClientConn, ctx context.Context, data []byte, seq uint64,
	opts ...grpc.CallOption) ([]byte, uint64, error) {
	in, out := msg(data, seq), []byte(nil)
	if err := cc.Invoke(ctx, svc+"Unary", &in, &out, opts...); err != nil {
		return nil, 0, err
	}
	return parseMsg(out)
}

// readStream reads a server stream to its end: the messages' total size, and the status.
func readStream(s grpc.ClientStream) (int, error) {
	total := 0
	for seq := uint64(0); ; seq++ {
		var b []byte
		if err := s.RecvMsg(&b); err != nil {
			return total, err
		}
		data, got, err := parseMsg(b)
		if err != nil {
			return total, err
		}
		if got != seq {
			return total, fmt.Errorf("message %d has seq %d", seq, got)
		}
		total += len(data)
	}
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: grpc_go_peer SOCKET")
		os.Exit(2)
	}
	sock := os.Args[1]
	cc, err := grpc.Dial("passthrough:///agentic", grpc.WithInsecure(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}),
			grpc.MaxCallRecvMsgSize(8*mib), grpc.MaxCallSendMsgSize(8*mib)))
	if err != nil {
		fmt.Printf("not ok 1 - grpc-go dials\n# %v\n", err)
		os.Exit(1)
	}
	defer cc.Close()
	bg := context.Background()

	check("grpc-go: unary echo", func() error {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		data, seq, err := unary(cc, ctx, []byte("hello"), 7)
		if err != nil {
			return err
		}
		if string(data) != "hello" || seq != 7 {
			return fmt.Errorf("echo was %q seq %d", data, seq)
		}
		return nil
	})

	check("grpc-go: health check is SERVING (generated stub)", func() error {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		r, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{},
			grpc.ForceCodec(encoding.GetCodec("proto")))
		if err != nil {
			return err
		}
		if r.Status != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("status %v", r.Status)
		}
		return nil
	})

	check("grpc-go: messages of 1 byte, 64 KiB+1 and 4 MiB - 16 echo whole", func() error {
		for _, n := range []int{1, 64*1024 + 1, 4*mib - 16} {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			data, _, err := unary(cc, ctx, pattern[:n], 0)
			cancel()
			if err != nil {
				return fmt.Errorf("%d bytes: %v", n, err)
			}
			if !bytes.Equal(data, pattern[:n]) {
				return fmt.Errorf("%d-byte echo differs", n)
			}
		}
		return nil
	})

	check("grpc-go: a request over 4 MiB is RESOURCE_EXHAUSTED, connection fine", func() error {
		ctx, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		_, _, err := unary(cc, ctx, pattern[:4*mib+1], 0)
		if e := wantCode(err, codes.ResourceExhausted); e != nil {
			return e
		}
		_, _, err = unary(cc, ctx, []byte("x"), 0)
		return err
	})

	check("grpc-go: server streaming of 64 MiB", func() error {
		ctx, cancel := context.WithTimeout(bg, 120*time.Second)
		defer cancel()
		s, err := cc.NewStream(ctx, serverStream, svc+"ServerStream")
		if err != nil {
			return err
		}
		req := streamRequest(4096, 16384)
		if err := s.SendMsg(&req); err != nil {
			return err
		}
		if err := s.CloseSend(); err != nil {
			return err
		}
		total, err := readStream(s)
		if err.Error() != "EOF" {
			return fmt.Errorf("after %d bytes: %v", total, err)
		}
		if total != 64*mib {
			return fmt.Errorf("%d bytes", total)
		}
		return nil
	})

	// The server's deadline (from grpc-timeout) and the client's race; whichever fires, the
	// status must be DEADLINE_EXCEEDED. When the server's fires with a message half written,
	// it must finish that message first: trailers after a cut message read as INTERNAL
	// "unexpected EOF".
	check("grpc-go: deadlines expiring mid-stream are DEADLINE_EXCEEDED, 40 of 40", func() error {
		for i := 0; i < 40; i++ {
			ctx, cancel := context.WithTimeout(bg, time.Duration(50+5*i)*time.Millisecond)
			s, err := cc.NewStream(ctx, serverStream, svc+"ServerStream")
			if err == nil {
				req := streamRequest(1000000, 65536+17)
				if err = s.SendMsg(&req); err == nil {
					_, err = readStream(s)
				}
			}
			cancel()
			if e := wantCode(err, codes.DeadlineExceeded); e != nil {
				return fmt.Errorf("run %d: %v", i, e)
			}
		}
		return nil
	})

	// Bidi echoes each message: a 2 MiB echo is still on the wire (grpc-go's window is far
	// smaller) when the next request, over the limit, fails the call.
	check("grpc-go: an oversize message mid-stream is RESOURCE_EXHAUSTED, 10 of 10", func() error {
		for i := 0; i < 10; i++ {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			s, err := cc.NewStream(ctx, bidiStream, svc+"Bidi")
			if err == nil {
				first, big := msg(pattern[:2*mib], 0), msg(pattern[:4*mib+1], 1)
				if err = s.SendMsg(&first); err == nil {
					_ = s.SendMsg(&big)
					var b []byte
					for err == nil {
						err = s.RecvMsg(&b)
					}
				}
			}
			cancel()
			if e := wantCode(err, codes.ResourceExhausted); e != nil {
				return fmt.Errorf("run %d: %v", i, e)
			}
		}
		return nil
	})

	// More cancels than the reset burst (H2_RESET_BUDGET, 200), spread over a few seconds:
	// a long-lived Bidi call on the same connection must live through them all.
	check("grpc-go: 300 cancels over 3 s on one connection, no GOAWAY", func() error {
		ctx, cancel := context.WithTimeout(bg, 60*time.Second)
		defer cancel()
		keep, err := cc.NewStream(ctx, bidiStream, svc+"Bidi")
		if err != nil {
			return err
		}
		echo := func(seq uint64) error {
			m, b := msg([]byte("alive"), seq), []byte(nil)
			if err := keep.SendMsg(&m); err != nil {
				return err
			}
			if err := keep.RecvMsg(&b); err != nil {
				return err
			}
			if _, got, _ := parseMsg(b); got != seq {
				return fmt.Errorf("echo seq %d, wanted %d", got, seq)
			}
			return nil
		}
		if err := echo(1); err != nil {
			return fmt.Errorf("before the cancels: %v", err)
		}
		for i := 0; i < 300; i++ {
			cctx, ccancel := context.WithCancel(ctx)
			in, out := msg(nil, 0), []byte(nil)
			done := make(chan error, 1)
			go func() { done <- cc.Invoke(cctx, svc+"Hang", &in, &out) }()
			time.Sleep(10 * time.Millisecond)
			ccancel()
			if e := wantCode(<-done, codes.Canceled); e != nil {
				return fmt.Errorf("cancel %d: %v", i, e)
			}
		}
		if err := echo(2); err != nil {
			return fmt.Errorf("the long-lived call died: %v", err)
		}
		return keep.CloseSend()
	})

	// RFC 9113 §8.2.1: a value with CR/LF, or with whitespace at an end, is malformed; the
	// server refuses the stream (INTERNAL here) and echoes nothing (Unary echoes x-echo).
	check("grpc-go: metadata with CR/LF or edge whitespace is refused, never reflected",
		func() error {
			for _, v := range []string{"a\r\nx-injected: 1", " padded", "padded\t"} {
				ctx, cancel := context.WithTimeout(bg, 10*time.Second)
				ctx = metadata.AppendToOutgoingContext(ctx, "x-echo", v)
				var hdr metadata.MD
				_, _, err := unary(cc, ctx, []byte("x"), 0, grpc.Header(&hdr))
				cancel()
				if len(hdr.Get("x-injected")) > 0 || len(hdr.Get("x-echo")) > 0 {
					return fmt.Errorf("%q reflected: %v", v, hdr)
				}
				if err == nil {
					return fmt.Errorf("%q accepted", v)
				}
			}
			ctx, cancel := context.WithTimeout(bg, 10*time.Second)
			defer cancel()
			_, _, err := unary(cc, ctx, []byte("after"), 0)
			return err
		})

	fmt.Printf("1..%d\n", nTest)
	if failed > 0 {
		os.Exit(1)
	}
}
