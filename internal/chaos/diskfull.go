package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// DiskFull is what the disk-full phase did: the server's store, a filesystem of its
// own, filled by a ballast file mid-run, held full, freed, and the server restarted
// when it did not take writes again by itself.
type DiskFull struct {
	// Skipped says why the phase did not run ("" when it did).
	Skipped string
	// Size is the store filesystem's size.
	Size int64
	// Filled is when the ballast took the last free byte; Faulted when nats-server's
	// /healthz first failed (zero if it never did) and Fault what it said; Freed when
	// the ballast was removed; Recovered when /healthz passed again.
	Filled, Faulted, Freed, Recovered time.Time
	Fault                             string
	// ByItself is whether the server took writes again without a restart, within
	// SelfWait of the space coming back; Restarted whether the run restarted it.
	ByItself, Restarted bool
	SelfWait            time.Duration
	// Unready is the router's /readyz failure during the fault ("" if it stayed ready).
	Unready string
	// Refused is how many publishes the publisher retried from the fill to the
	// recovery: refused or unconfirmed while the store could not write.
	Refused int
	// Triggers are those in flight while the store was full: published before it
	// took writes again, without their outcome when it filled. Lost and Duplicates
	// count their lost triggers and extra outcomes.
	Triggers, Lost, Duplicates int
}

// mountStore puts the server's store on a tmpfs of size bytes, which the phase can
// fill without touching the machine's disks. It returns why it cannot.
func mountStore(dir string, size int64) (skipped string) {
	switch {
	case runtime.GOOS != "linux":
		return "a tmpfs for the store needs Linux; this is " + runtime.GOOS
	case os.Geteuid() != 0:
		return "mounting a tmpfs for the store needs root; run as root, or pass -disk-full=false"
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0755", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("mount -t tmpfs on %s failed (%v: %s); pass -disk-full=false", dir, err, strings.TrimSpace(string(out)))
	}
	return ""
}

func unmountStore(dir string) {
	_ = exec.Command("umount", "-l", dir).Run()
}

// fill writes a ballast file in dir until the filesystem has no byte left.
func fill(dir string) (string, error) {
	name := filepath.Join(dir, "ballast")
	f, err := os.Create(name)
	if err != nil {
		return name, err
	}
	defer f.Close()
	for _, n := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, n)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					return name, err
				}
				break
			}
		}
	}
	return name, nil
}

// healthz asks nats-server's monitoring /healthz: "" when it passes, else what it says.
func healthz(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// diskFull runs the phase: fill the store, wait for JetStream to fail, hold, free,
// give the server SelfWait to take writes again by itself, and restart it (SIGTERM,
// as an operator would) if it does not.
func (r *runner) diskFull(ctx context.Context) error {
	d := &r.disk
	log := r.cfg.Log
	store := filepath.Join(r.dir, "nats")
	r.mu.Lock()
	retries := r.faults.PublishRetries
	r.mu.Unlock()
	ballast, err := fill(store)
	d.Filled = time.Now()
	freed := false
	free := func() {
		if !freed {
			freed = true
			if err := os.Remove(ballast); err != nil {
				log.Error("chaos: removing the ballast", "err", err)
			}
			d.Freed = time.Now()
		}
	}
	defer free() // never leave the store full, whatever happens
	if err != nil {
		return fmt.Errorf("filling the store: %w", err)
	}
	log.Info("chaos: fault", "fault", "disk full", "store", store)

	// Wait for JetStream to say so; the fleet writes all the time.
	deadline := time.Now().Add(30 * time.Second)
	for d.Faulted.IsZero() && time.Now().Before(deadline) && ctx.Err() == nil {
		if msg := healthz(ctx, r.healthz); msg != "" {
			d.Faulted, d.Fault = time.Now(), msg
			break
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a condition
	}
	if d.Faulted.IsZero() {
		log.Warn("chaos: nats-server's /healthz did not fail within 30s of the store filling")
	}
	// Hold, watching the router's readiness.
	until := time.Now().Add(r.cfg.DiskHold)
	for time.Now().Before(until) && ctx.Err() == nil {
		if d.Unready == "" {
			if msg := readyz(ctx, r.readyz); msg != "" {
				d.Unready = msg
			}
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a condition
	}
	free()
	log.Info("chaos: store freed; waiting for nats-server to take writes again", "up_to", r.cfg.DiskSelfWait)
	deadline = d.Freed.Add(r.cfg.DiskSelfWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if healthz(ctx, r.healthz) == "" {
			d.ByItself, d.Recovered = true, time.Now()
			break
		}
		time.Sleep(100 * time.Millisecond) // polling interval of a condition
	}
	if !d.ByItself {
		log.Info("chaos: nats-server did not recover by itself; restarting it, as its operator must")
		d.Restarted = true
		from := time.Now()
		if _, _, _, err := r.server.signal(syscall.SIGTERM, 30*time.Second); err != nil {
			return fmt.Errorf("stopping nats-server after the disk-full phase: %w", err)
		}
		if err := r.server.start(); err != nil {
			return err
		}
		err := r.waitServer(30 * time.Second)
		r.mu.Lock()
		r.outages = append(r.outages, [2]time.Time{from, time.Now()})
		r.mu.Unlock()
		if err != nil {
			return err
		}
		deadline = time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if healthz(ctx, r.healthz) == "" {
				d.Recovered = time.Now()
				break
			}
			time.Sleep(100 * time.Millisecond) // polling interval of a condition
		}
		if d.Recovered.IsZero() {
			return errors.New("nats-server's /healthz still fails 60s after its restart")
		}
	}
	r.mu.Lock()
	d.Refused = r.faults.PublishRetries - retries
	r.mu.Unlock()
	d.SelfWait = r.cfg.DiskSelfWait
	log.Info("chaos: disk-full phase over", "fault", d.Fault, "by_itself", d.ByItself, "restarted", d.Restarted,
		"recovered_after", d.Recovered.Sub(d.Freed).Round(time.Millisecond))
	return nil
}

// readyz asks a skillbus process's /readyz: "" when ready, else its first failing check.
func readyz(ctx context.Context, url string) string {
	msg := healthz(ctx, url)
	if msg == "" {
		return ""
	}
	for l := range strings.Lines(msg) {
		if strings.HasPrefix(l, "[-] ") {
			return strings.TrimSpace(l)
		}
	}
	return msg
}

// count counts the phase's triggers: those in flight while the store was full,
// published before it took writes again and without their outcome when it filled.
// sent are the triggers' first publishes, by Trigger.N.
func (d *DiskFull) count(ts []Trigger, sent []time.Time, o Outcomes) {
	if d.Filled.IsZero() || d.Recovered.IsZero() {
		return
	}
	for _, t := range ts {
		if sent[t.N].IsZero() || sent[t.N].After(d.Recovered) {
			continue
		}
		f := o.Final(t)
		if f != nil && f.FinishedAt.Before(d.Filled) {
			continue
		}
		d.Triggers++
		if f == nil {
			d.Lost++
		}
		for _, id := range o.Chain(t) {
			d.Duplicates += max(len(o[id])-1, 0)
		}
	}
}

// print writes the phase's lines of the report.
func (d *DiskFull) print(line func(name string, v any, note string)) {
	if d.Skipped != "" {
		line("disk full", "SKIPPED", d.Skipped)
		return
	}
	since := func(from, to time.Time) string { return to.Sub(from).Round(100 * time.Millisecond).String() }
	what := fmt.Sprintf("store (tmpfs of %s) filled at %s", size(d.Size), d.Filled.Format("15:04:05"))
	if d.Faulted.IsZero() {
		what += ", nats-server's /healthz NEVER FAILED"
	} else {
		what += fmt.Sprintf(", /healthz failing %s later", since(d.Filled, d.Faulted))
	}
	what += fmt.Sprintf(", freed after %s", since(d.Filled, d.Freed))
	switch {
	case d.ByItself:
		what += fmt.Sprintf("; took writes again by itself %s after", since(d.Freed, d.Recovered))
	case d.Restarted:
		what += fmt.Sprintf("; not back by itself within %s: nats-server restarted (SIGTERM), taking writes %s after the space was freed", d.SelfWait, since(d.Freed, d.Recovered))
	}
	line("disk full", what, "")
	if d.Fault != "" {
		line("disk full: nats-server /healthz", d.Fault, "")
	}
	unready := d.Unready
	if unready == "" {
		unready = "STAYED READY"
	}
	line("disk full: router /readyz", unready, "")
	line("disk full: triggers", d.Triggers, fmt.Sprintf("in flight while the store was full: published before it took writes again, no outcome when it filled; %d publishes refused or unconfirmed meanwhile", d.Refused))
	line("disk full: lost", d.Lost, "")
	line("disk full: duplicate terminals", d.Duplicates, "")
}

func size(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
