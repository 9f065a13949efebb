package bus_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillbus/skillbus/pkg/bus"
)

// A restart keeps the store limit the first start resolved from the free space,
// even when the free space has shrunk since, as it has after a full disk.
func TestEmbeddedRestartKeepsResolvedMaxStore(t *testing.T) {
	dir := t.TempDir()
	e, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: filepath.Join(dir, "js")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	want := e.Current().JetStreamConfig().MaxStore
	if want <= 0 {
		t.Fatalf("resolved max store %d", want)
	}
	// Take 8 MiB of the free space, so a limit resolved again would differ.
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := e.Current().JetStreamConfig().MaxStore; got != want {
		t.Errorf("max store after restart %d, want %d as first resolved", got, want)
	}
}

// Two servers on one store would write the same JetStream files: a second start
// on a store in use is refused, saying so, and takes it once the first is down.
func TestEmbeddedStoreInUseIsRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "js")
	first, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	second, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: dir})
	if err == nil {
		second.Shutdown()
		first.Shutdown()
		t.Fatal("a second server started on a store in use")
	}
	if !strings.Contains(err.Error(), "is in use by another server of this process") || !strings.Contains(err.Error(), "--store") {
		t.Errorf("error %q does not say the store is in use, by whom, and what to do", err)
	}
	first.Shutdown()
	again, err := bus.StartEmbedded(bus.EmbedConfig{Port: -1, StoreDir: dir})
	if err != nil {
		t.Fatalf("the store was not free after the first server shut down: %v", err)
	}
	again.Shutdown()
}
