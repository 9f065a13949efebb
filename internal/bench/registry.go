package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/internal/skillgen"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/registry"
	"github.com/skillbus/skillbus/pkg/skill"
)

// RegistryConfig configures the registry benchmark.
type RegistryConfig struct {
	// Skills generated for the cold load; default 10000 (issue 3's figure).
	Skills int
	// CatalogSkills is the size of the catalog the registry watches while edits are
	// measured; default Skills (the same generated directory).
	CatalogSkills int
	// Edits made one at a time, each timed from the write to the moment every
	// catalog holds it; default 100.
	Edits int
	// Catalogs following the bucket, each on its own connection: 1 router and 4
	// workers by default (5).
	Catalogs int
	// Debounce of the registry's watcher; 0 keeps the registry's default (100ms).
	Debounce time.Duration
	// SyncInterval of the embedded server; 0 keeps the default (2m).
	SyncInterval time.Duration
	// Storage is file (default) or memory.
	Storage jetstream.StorageType
	// Out receives the report; default stdout.
	Out io.Writer
	// Log receives skillbus's own logs; default discards them.
	Log *slog.Logger
}

func (c *RegistryConfig) defaults() {
	if c.Skills == 0 {
		c.Skills = 10000
	}
	if c.CatalogSkills == 0 {
		c.CatalogSkills = c.Skills
	}
	if c.Edits == 0 {
		c.Edits = 100
	}
	if c.Catalogs == 0 {
		c.Catalogs = 5
	}
	if c.Debounce == 0 {
		c.Debounce = 100 * time.Millisecond
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	if c.Log == nil {
		c.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// RunRegistry measures the registry (issue 3): (a) loading and validating Skills
// generated skills, cold in the sense that nothing is cached in the process (the
// files were just written, so the page cache is warm); (b) the latency of an edit on
// disk until the catalogs of a router and workers (Catalogs catalog.Watch instances,
// each on its own connection to an embedded server) hold it, with a registry
// watching CatalogSkills skills. It prints the figures with their settings.
func RunRegistry(ctx context.Context, cfg RegistryConfig) error {
	cfg.defaults()
	w := cfg.Out
	fmt.Fprintf(w, "skillbus bench --registry: GOMAXPROCS %d%s\n", runtime.GOMAXPROCS(0), loadAverage())

	// (a) Cold load and validation.
	dir, err := os.MkdirTemp("", "skillbus-bench-skills-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := skillgen.Generate(dir, cfg.Skills); err != nil {
		return err
	}
	start := time.Now()
	cat, ds := skill.Discover(dir)
	load := time.Since(start)
	if len(cat.Skills) != cfg.Skills || ds.HasErrors() {
		return fmt.Errorf("load: %d of %d skills valid:\n%s", len(cat.Skills), cfg.Skills, ds.Errors())
	}
	fmt.Fprintf(w, "  load+validate     %6d skills in %8s   (%s/skill; goal ≤ 2s for 10000)\n",
		cfg.Skills, load.Round(time.Millisecond), (load / time.Duration(cfg.Skills)).Round(time.Microsecond))
	fmt.Fprintf(w, "  settings: skill.Discover of one root, 4 kinds in equal parts (instruction+reference, workflow, script, single file), categories of 100, dependencies between neighbours; files just written (page cache warm)\n")

	// (b) Edit to every catalog.
	if cfg.CatalogSkills != cfg.Skills {
		if dir, err = os.MkdirTemp("", "skillbus-bench-watch-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if err := skillgen.Generate(dir, cfg.CatalogSkills); err != nil {
			return err
		}
	}
	lat, initial, err := measureEdits(ctx, cfg, dir)
	if err != nil {
		return err
	}
	storage := "file"
	if cfg.Storage == jetstream.MemoryStorage {
		storage = "memory"
	}
	sync := "default (2m)"
	if cfg.SyncInterval > 0 {
		sync = cfg.SyncInterval.String()
	}
	fmt.Fprintf(w, "  first publish     %6d skills in %8s   (load, files to the object store, version and current keys to KV, until Start returns)\n",
		cfg.CatalogSkills, initial.Round(time.Millisecond))
	fmt.Fprintf(w, "  edit→catalogs     %6d edits    p50 %8s  p99 %8s  max %8s   (goal p99 ≤ 200ms)\n",
		len(lat), percentile(lat, 0.5).Round(time.Millisecond/10), percentile(lat, 0.99).Round(time.Millisecond/10), slices.Max(lat).Round(time.Millisecond/10))
	fmt.Fprintf(w, "  settings: %d catalogs (1 router + %d workers), each on its own connection; %d skills watched; debounce %s; one SKILL.md rewritten in place per edit, the next after the last is seen; storage=%s replicas=1 sync_interval=%s\n",
		cfg.Catalogs, cfg.Catalogs-1, cfg.CatalogSkills, cfg.Debounce, storage, sync)
	return nil
}

// measureEdits runs (b) on the skills in dir: it returns the latency of each edit
// and the time of the registry's first publish (load, upload, keys; the catalogs
// following it).
func measureEdits(ctx context.Context, cfg RegistryConfig, dir string) ([]time.Duration, time.Duration, error) {
	srv, nc, cleanup, err := server(ctx, Config{SyncInterval: cfg.SyncInterval})
	if err != nil {
		return nil, 0, err
	}
	defer cleanup()
	b, err := bus.New(nc, bus.Config{Storage: cfg.Storage})
	if err != nil {
		return nil, 0, err
	}
	if err := b.Ensure(ctx); err != nil {
		return nil, 0, err
	}
	var cats []*catalog.Catalog
	defer func() {
		for _, c := range cats {
			c.Stop()
		}
	}()
	for i := range cfg.Catalogs {
		role := "worker"
		if i == 0 {
			role = "router"
		}
		cnc, err := bus.Connect(srv.URL(), fmt.Sprintf("bench-%s-%d", role, i))
		if err != nil {
			return nil, 0, err
		}
		defer cnc.Close()
		cb, err := bus.New(cnc, bus.Config{Storage: cfg.Storage})
		if err != nil {
			return nil, 0, err
		}
		kv, err := cb.KV(ctx, cb.BucketSkills())
		if err != nil {
			return nil, 0, err
		}
		c, err := catalog.Watch(ctx, kv, cfg.Log)
		if err != nil {
			return nil, 0, err
		}
		cats = append(cats, c)
	}
	reg, err := registry.New(registry.Config{Bus: b, Roots: []string{dir}, Log: cfg.Log, Debounce: cfg.Debounce})
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := reg.Start(ctx); err != nil {
		return nil, 0, err
	}
	defer reg.Stop()
	initial := time.Since(start)
	for _, c := range cats {
		if err := c.Wait(ctx, func(c *catalog.Catalog) bool { return len(c.All()) == cfg.CatalogSkills }); err != nil {
			return nil, 0, fmt.Errorf("catalogs never held the %d skills: %w", cfg.CatalogSkills, err)
		}
	}

	lat := make([]time.Duration, 0, cfg.Edits)
	for i := range cfg.Edits {
		n := (i * 7919) % cfg.CatalogSkills // spread over the catalog
		if n%4 == 3 {
			n-- // a skill directory, so that every edit rewrites a SKILL.md
		}
		name := skillName(n)
		desc := "Edited " + strconv.Itoa(i) + " times for the watch benchmark."
		p := filepath.Join(dir, skillgen.Category(n), name, "SKILL.md")
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, 0, err
		}
		edited, err := setDescription(data, desc)
		if err != nil {
			return nil, 0, err
		}
		var wg sync.WaitGroup
		done := make([]time.Time, len(cats))
		errs := make([]error, len(cats))
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		written := time.Now()
		if err := os.WriteFile(p, edited, 0o644); err != nil {
			cancel()
			return nil, 0, err
		}
		for k, c := range cats {
			wg.Go(func() {
				errs[k] = c.Wait(wctx, func(c *catalog.Catalog) bool {
					s, ok := c.Get(name)
					return ok && s.Description == desc
				})
				done[k] = time.Now()
			})
		}
		wg.Wait()
		cancel()
		if err := errors.Join(errs...); err != nil {
			return nil, 0, fmt.Errorf("edit %d of %s never reached every catalog: %w", i, name, err)
		}
		lat = append(lat, slices.MaxFunc(done, func(a, b time.Time) int { return a.Compare(b) }).Sub(written))
	}
	return lat, initial, nil
}

// loadAverage is the machine's load when the benchmark starts, where the system
// says: figures on a busy shared machine are not figures on an idle one.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return ", load average " + strings.Join(f[:3], " ")
}

func skillName(i int) string { return skillgen.Name(i) }

// setDescription rewrites the description line of a generated SKILL.md.
func setDescription(data []byte, desc string) ([]byte, error) {
	lines := slices.Collect(func(yield func(string) bool) {
		start := 0
		for i, c := range data {
			if c == '\n' {
				if !yield(string(data[start : i+1])) {
					return
				}
				start = i + 1
			}
		}
		if start < len(data) {
			yield(string(data[start:]))
		}
	})
	for i, l := range lines {
		if len(l) > 12 && l[:12] == "description:" {
			lines[i] = "description: " + desc + "\n"
			out := []byte{}
			for _, l := range lines {
				out = append(out, l...)
			}
			return out, nil
		}
	}
	return nil, errors.New("generated SKILL.md has no description line")
}
