// fakelet-front: the gRPC side of a fakelet shard, compiled. One listener per fake node on
// 127.0.0.1; it answers the two calls the GCS makes to every node all the time (grpc.health.v1
// Check, every health_check_period_ms; NodeManagerService/GetResourceLoad, every
// gcs_pull_resource_loads_period_milliseconds) itself, and forwards every other call, as raw
// bytes, to the Python shard that owns the node's bundle book (fakes/ray/fakelets/front.py).
//
// Protocol: JSON lines. stdin (from the shard):
//
//	{"op":"open","node":I,"port":P}    listen on 127.0.0.1:P (any free port if taken) -> {"ev":"opened","node":I,"port":Q}
//	{"op":"close","node":I}            stop listening, drop its connections         -> {"ev":"closed","node":I}
//	{"op":"load","node":I,"data":B64}  the node's GetResourceLoad reply from now on
//	{"op":"reply","id":N,"code":C,"data":B64}  the answer to forwarded call N (C: a gRPC status code)
//	{"op":"stats"}                     -> {"ev":"stats","calls":{METHOD:N}} (the calls answered here)
//
// stdout (to the shard): the replies above and {"ev":"call","id":N,"node":I,"method":M,"data":B64}.
// EOF on stdin stops every listener and exits.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	healthCheck     = "/grpc.health.v1.Health/Check"
	getResourceLoad = "/ray.rpc.NodeManagerService/GetResourceLoad"
)

// SERVING: grpc.health.v1.HealthCheckResponse{status: 1}
var serving = []byte{0x08, 0x01}

// raw passes message bytes through untouched: nothing here parses a protobuf.
type raw struct{}

func (raw) Marshal(v any) ([]byte, error)   { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(b []byte, v any) error { *(v.(*[]byte)) = append([]byte(nil), b...); return nil }
func (raw) Name() string                    { return "proto" }

type command struct {
	Op   string `json:"op"`
	Node int    `json:"node"`
	Port int    `json:"port"`
	ID   uint64 `json:"id"`
	Code int    `json:"code"`
	Data []byte `json:"data"`
}

type answer struct {
	code codes.Code
	data []byte
}

type front struct {
	out     *json.Encoder
	outMu   sync.Mutex
	mu      sync.Mutex
	servers map[int]*grpc.Server
	loads   map[int][]byte
	pending map[uint64]chan answer
	nextID  atomic.Uint64
	health  atomic.Uint64
	load    atomic.Uint64
}

func (f *front) send(v any) {
	f.outMu.Lock()
	defer f.outMu.Unlock()
	if err := f.out.Encode(v); err != nil {
		os.Exit(1) // the shard is gone
	}
}

func (f *front) handler(node int) grpc.StreamHandler {
	return func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		switch method {
		case healthCheck:
			f.health.Add(1)
			return stream.SendMsg(&serving)
		case getResourceLoad:
			f.mu.Lock()
			data, ok := f.loads[node]
			f.mu.Unlock()
			if ok {
				f.load.Add(1)
				return stream.SendMsg(&data)
			}
		}
		id := f.nextID.Add(1)
		ch := make(chan answer, 1)
		f.mu.Lock()
		f.pending[id] = ch
		f.mu.Unlock()
		f.send(map[string]any{"ev": "call", "id": id, "node": node, "method": method, "data": req})
		select {
		case a := <-ch:
			if a.code != codes.OK {
				return status.Error(a.code, "fakelet")
			}
			return stream.SendMsg(&a.data)
		case <-stream.Context().Done():
			f.mu.Lock()
			delete(f.pending, id)
			f.mu.Unlock()
			return stream.Context().Err()
		}
	}
}

func (f *front) open(node, port int) {
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		lis, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		f.send(map[string]any{"ev": "opened", "node": node, "port": 0, "error": err.Error()})
		return
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(raw{}), grpc.UnknownServiceHandler(f.handler(node)))
	f.mu.Lock()
	f.servers[node] = srv
	f.mu.Unlock()
	go srv.Serve(lis)
	f.send(map[string]any{"ev": "opened", "node": node, "port": lis.Addr().(*net.TCPAddr).Port})
}

func (f *front) close(node int) {
	f.mu.Lock()
	srv := f.servers[node]
	delete(f.servers, node)
	delete(f.loads, node)
	f.mu.Unlock()
	if srv != nil {
		srv.Stop() // as a SIGKILLed raylet: listener closed, connections dropped, calls failed
	}
	f.send(map[string]any{"ev": "closed", "node": node})
}

func main() {
	f := &front{out: json.NewEncoder(os.Stdout), servers: map[int]*grpc.Server{}, loads: map[int][]byte{},
		pending: map[uint64]chan answer{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintf(os.Stderr, "fakelet-front: bad command %q: %v\n", in.Text(), err)
			continue
		}
		switch c.Op {
		case "open":
			f.open(c.Node, c.Port)
		case "close":
			f.close(c.Node)
		case "load":
			f.mu.Lock()
			f.loads[c.Node] = c.Data
			f.mu.Unlock()
		case "reply":
			f.mu.Lock()
			ch := f.pending[c.ID]
			delete(f.pending, c.ID)
			f.mu.Unlock()
			if ch != nil {
				ch <- answer{codes.Code(c.Code), c.Data}
			}
		case "stats":
			f.send(map[string]any{"ev": "stats", "calls": map[string]uint64{healthCheck: f.health.Load(),
				getResourceLoad: f.load.Load()}})
		default:
			fmt.Fprintf(os.Stderr, "fakelet-front: unknown op %q\n", c.Op)
		}
	}
	f.mu.Lock()
	for _, srv := range f.servers {
		srv.Stop()
	}
	f.mu.Unlock()
}
