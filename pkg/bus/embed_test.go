package bus_test

import (
	"os"
	"path/filepath"
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
