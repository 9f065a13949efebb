package cli_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/skillbus/skillbus/internal/cli"
)

// skillbus dev's workers are NATS micro services like the worker binary's: $SRV.INFO
// lists each of them beside the registry and the router, and each answers
// skillbus.worker.<name>.status.
func TestDevWorkersAreMicroServices(t *testing.T) {
	t.Parallel()
	logs := startDev(t, "--workers", "2", "--name", "devw")
	nc, err := nats.Connect(devLine(t, logs, `NATS\s+(nats://127\.0\.0\.1:\d+)`)[1])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	// Every instance of skillbus-worker answers $SRV.INFO.skillbus-worker.
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$SRV.INFO."+cli.WorkerServiceName, inbox, nil); err != nil {
		t.Fatal(err)
	}
	var names []string
	for len(names) < 2 {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("%d skillbus-worker services answered $SRV.INFO (%v), want 2: %v", len(names), err, names)
		}
		var info micro.Info
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		names = append(names, info.Metadata["name"])
	}
	slices.Sort(names)
	if want := []string{"devw-1", "devw-2"}; !slices.Equal(names, want) {
		t.Fatalf("worker services %v, want %v", names, want)
	}
	for _, name := range names {
		m, err := nc.Request("skillbus.worker."+name+".status", nil, 10*time.Second)
		if err != nil {
			t.Fatalf("skillbus.worker.%s.status: %v", name, err)
		}
		var st struct {
			Name      string         `json:"name"`
			Consumers map[string]any `json:"consumers"`
		}
		if err := json.Unmarshal(m.Data, &st); err != nil || st.Name != name || st.Consumers["worker-default"] == nil {
			t.Errorf("skillbus.worker.%s.status answered %s (%v)", name, m.Data, err)
		}
	}
}
