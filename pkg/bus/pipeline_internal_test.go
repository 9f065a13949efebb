package bus

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readPubAckAsJetStream is how PublishMsgAsync reads an acknowledgement.
func readPubAckAsJetStream(data []byte) (bool, error) {
	var pa struct {
		Type  string              `json:"type"`
		Error *jetstream.APIError `json:"error,omitempty"`
		*jetstream.PubAck
	}
	if err := json.Unmarshal(data, &pa); err != nil {
		return false, jetstream.ErrInvalidJSAck
	}
	if pa.Error != nil {
		return false, pa.Error
	}
	if pa.PubAck == nil || pa.Stream == "" {
		return false, jetstream.ErrInvalidJSAck
	}
	return pa.Duplicate, nil
}

var pubAcks = []string{
	`{"stream":"SKILLBUS_JOBS","seq":12}`,
	`{"stream":"SKILLBUS_JOBS","seq":12,"duplicate":true}`,
	`{"stream":"S","domain":"hub","seq":1}`,
	`{"stream":"S","seq":1,"val":"5"}`,
	`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 4"},"stream":"S","seq":0}`,
	`{"error":{"code":503,"err_code":10077,"description":"duplicate message id is in process"}}`,
	`{"stream":"","seq":1}`,
	`{"seq":1}`,
	`{"Stream":"S","seq":1}`,
	`{"stream":"S","seq":-1}`,
	`{"stream":"S","seq":1,"duplicate":null}`,
	`{"stream":"S","seq":1} x`,
	`{"type":"io.nats.jetstream.api.v1.pub_ack","stream":"S","seq":1}`,
	`{"stream":"S\u0041","seq":1,"duplicate":true,"duplicate":false}`,
	`{"type":5,"stream":"S","seq":1}`,
	`[]`,
	``,
	`null`,
}

// readPubAck reads every acknowledgement as PublishMsgAsync does: the same
// duplicate flag, and an error exactly when it errs (the same one).
func TestReadPubAckAsJetStream(t *testing.T) {
	for _, s := range pubAcks {
		checkPubAck(t, []byte(s))
	}
}

func FuzzReadPubAck(f *testing.F) {
	for _, s := range pubAcks {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkPubAck(t, data) })
}

func checkPubAck(t *testing.T, data []byte) {
	t.Helper()
	dup, err := readPubAck(data)
	wantDup, wantErr := readPubAckAsJetStream(data)
	var apiErr, wantAPIErr *jetstream.APIError
	switch {
	case errors.As(wantErr, &wantAPIErr):
		if !errors.As(err, &apiErr) || *apiErr != *wantAPIErr {
			t.Errorf("%s: err = %v, want %v", data, err, wantErr)
		}
	case err != wantErr: // sentinels, or both nil
		t.Errorf("%s: err = %v, want %v", data, err, wantErr)
	case dup != wantDup:
		t.Errorf("%s: duplicate = %v, want %v", data, dup, wantDup)
	}
}

// Reading the usual acknowledgement allocates nothing.
func TestReadPubAckAllocs(t *testing.T) {
	ack := []byte(`{"stream":"SKILLBUS_JOBS","seq":123456,"duplicate":true}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = readPubAck(ack) }); n != 0 {
		t.Errorf("readPubAck allocates %v times", n)
	}
}

// startServer starts a NATS server without JetStream: natstest's helpers use
// this package.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv
}

// A publish that could not subscribe to the acknowledgements (its connection
// refused it: closed, or draining) fails, and the next publish subscribes again,
// as PublishMsgAsync's does, rather than failing the same way for good.
func TestPipelineStartsAgainAfterAFailure(t *testing.T) {
	srv := startServer(t)
	refusing, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	refusing.Close()
	p := newPipeline(refusing, time.Minute, 16)
	if _, err := p.send(&nats.Msg{Subject: "x", Data: []byte("x")}); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("send on a closed connection = %v, want ErrConnectionClosed", err)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("x") // answers for a stream
	if err != nil {
		t.Fatal(err)
	}
	p.nc = nc // the connection accepts subscriptions again
	f, err := p.send(&nats.Msg{Subject: "x", Data: []byte("x")})
	if err != nil {
		t.Fatalf("send after the connection accepts subscriptions again = %v", err)
	}
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(m.Reply, []byte(`{"stream":"S","seq":1}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wake chan struct{}
	if _, err, stop := p.await(ctx, f, &wake); err != nil || stop != nil {
		t.Fatalf("the publish's acknowledgement was not read: %v, %v", err, stop)
	}
}

// A publisher waiting for room waits stallWait in all, as PublishMsgAsync's
// does, then fails with ErrTooManyStalledMsgs, however often room is made and
// taken by others before it gets it.
func TestPipelineStallIsBoundedInAll(t *testing.T) {
	srv := startServer(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync("x"); err != nil { // takes the publishes, never answers
		t.Fatal(err)
	}
	p := newPipeline(nc, time.Minute, 1)
	if _, err := p.send(&nats.Msg{Subject: "x", Data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	// Others keep making room and taking it again before the publisher does.
	stop := make(chan struct{})
	taking := make(chan struct{})
	go func() {
		defer close(taking)
		for {
			select {
			case <-stop:
				return
			default:
			}
			p.mu.Lock()
			if p.stalled != nil {
				close(p.stalled)
				p.stalled = nil
			}
			p.mu.Unlock()
			runtime.Gosched()
		}
	}()
	defer func() { close(stop); <-taking }()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.send(&nats.Msg{Subject: "x", Data: []byte("x")})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			t.Fatalf("send = %v, want ErrTooManyStalledMsgs", err)
		}
		if d := time.Since(start); d < stallWait {
			t.Fatalf("send failed after %v, before stallWait", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("send still waiting for room after 10s")
	}
}
