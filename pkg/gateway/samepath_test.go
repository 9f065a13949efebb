package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/client"
	"github.com/skillbus/skillbus/pkg/gateway"
)

// The gateway and the client publish a trigger through one path: the same event,
// posted to the gateway or published with the client, is stored with the same
// headers — its attributes, data content type, message id and trace context.
func TestGatewayAndClientPublishAlike(t *testing.T) {
	const (
		id, source, typ = "same-1", "/same", "com.example.same"
		traceparent     = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		data            = `{"name":"Ada"}`
	)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	stored := func(f *fixture) nats.Header {
		t.Helper()
		st, err := f.b.Stream(f.ctx, f.b.StreamTriggers())
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.GetLastMsgForSubject(f.ctx, f.b.Subjects.Trigger(typ))
		if err != nil {
			t.Fatal(err)
		}
		return m.Header
	}

	viaGateway := setup(t, gateway.Config{Tokens: []string{token}})
	h := map[string]string{"Authorization": "Bearer " + token, "ce-specversion": "1.0", "ce-id": id, "ce-source": source, "ce-type": typ,
		"ce-time": at.Format(time.RFC3339), "ce-traceparent": traceparent, "Content-Type": "application/json"}
	if code, out, _ := viaGateway.post("/events", h, data); code != http.StatusAccepted {
		t.Fatalf("gateway: %d %v", code, out)
	}

	viaClient := setup(t, gateway.Config{Tokens: []string{token}})
	if _, err := client.New(viaClient.b).Publish(viaClient.ctx, client.Trigger{Type: typ, Source: source, ID: id, Time: at,
		Data: []byte(data), Meta: bus.Meta{TraceParent: traceparent}}); err != nil {
		t.Fatal(err)
	}

	gh, ch := stored(viaGateway), stored(viaClient)
	if diff := cmp.Diff(gh, ch); diff != "" {
		t.Errorf("the trigger's headers, published by the gateway (-) and by the client (+):\n%s", diff)
	}
	if gh.Get(bus.HeaderMsgID) == "" || gh.Get("ce-traceparent") == "" {
		t.Errorf("the trigger carries no message id or trace context: %v", gh)
	}
}
