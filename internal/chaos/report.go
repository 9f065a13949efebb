package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skillbus/skillbus/pkg/run"
)

// Report is what a chaos run found.
type Report struct {
	Triggers int
	Tally
	// Repeats are the steps whose side effect happened more than once; Killed of them
	// were re-run because the worker running them was SIGKILLed before it could
	// record them, Unexplained were not, and Concurrent ran two copies at once.
	Repeats                         []Repeat
	Killed, Unexplained, Concurrent int
	// NearOutage of the Unexplained: an earlier copy ended at most 10s before, or
	// during, a nats-server outage, so its worker could not record it.
	NearOutage int
	// Effects is how many side effects happened; Interrupted how many began and
	// never finished (their worker's process was killed... or they were).
	Effects, Interrupted int
	// Parked is how many exec processes were found stopped before their
	// program's first instruction: their worker died as it started them, and the
	// exec tool saw to it that they never ran. The run kills them.
	Parked int
	// MaxConcurrent is the most runs of each max_concurrent skill seen at once;
	// Declared its max_concurrent.
	MaxConcurrent, Declared map[string]int
	// TooLarge is how many chaos-big triggers failed with result_too_large, of Big.
	TooLarge, Big int
	// Pending is, per consumer, jobs or triggers not yet acknowledged at the end.
	Pending map[string]uint64
	Faults  Faults
	// Keyed, Debounce and Schedule are what the flow-control skills' runs did;
	// their triggers are not among Triggers nor in the Tally.
	Keyed    KeyedTally
	Debounce DebounceTally
	Schedule ScheduleTally
	// Disk is what the disk-full phase did and found.
	Disk    DiskFull
	Outages [][2]time.Time
	Seed    uint64
	Wall    time.Duration
	Dir     string // where the logs are; "" when removed after a clean run
	// Store is where the server's store was kept, after a run that failed.
	Store string
	// KeyedRecords are, for the first lost chaos-keyed runs, what KV runs held
	// of each and of its key's slot at the end.
	KeyedRecords []string
	names        map[int]string
	kills        Kills
	byExec       map[string]Trigger
}

// OK reports whether the run kept every promise: nothing lost, one outcome per
// execution, no side effect repeated except after its worker was killed mid-step,
// no two copies at once, every max_concurrent bound held, every oversize result
// failed clearly, and the flow-control skills kept theirs (see their OK).
func (r *Report) OK() bool {
	if !r.Keyed.OK() || !r.Debounce.OK() || !r.Schedule.OK() {
		return false
	}
	for s, n := range r.MaxConcurrent {
		if n > r.Declared[s] {
			return false
		}
	}
	return r.Lost == 0 && r.Duplicates == 0 && r.Disk.Lost == 0 && r.Disk.Duplicates == 0 && len(r.Conflicting) == 0 && r.Unexplained == 0 && r.Concurrent == 0 && r.TooLarge == r.Big
}

func (r *runner) verify(ctx context.Context) (*Report, error) {
	rd := &reader{b: r.b, out: Outcomes{}}
	var err error
	for try := 0; try < 10; try++ {
		rd = &reader{b: r.b, out: Outcomes{}}
		if err = rd.poll(ctx); err == nil {
			break
		}
		time.Sleep(time.Second) // the server may still be coming up
	}
	if err != nil {
		return nil, fmt.Errorf("chaos: reading the outcomes: %w", err)
	}
	// The flow-control skills' outcomes are counted apart.
	main, flow := Outcomes{}, map[string][]*run.Record{}
	for id, recs := range rd.out {
		if flowSkill(recs[0].Skill) {
			flow[recs[0].Skill] = append(flow[recs[0].Skill], recs...)
		} else {
			main[id] = recs
		}
	}
	rep := &Report{Triggers: len(r.main), Tally: main.Count(r.main), Declared: map[string]int{},
		MaxConcurrent: map[string]int{}, Pending: map[string]uint64{}, Seed: r.cfg.Seed, byExec: map[string]Trigger{}}
	rep.Debounce = CountDebounce(r.debounced, flow[debouncedSkill])
	rep.Schedule = CountSchedule(flow[scheduledSkill], scheduleEvery, time.Since(r.fleetUp))
	for _, t := range r.main {
		rep.byExec[t.Execution] = t
		if t.Skill != "chaos-big" {
			continue
		}
		rep.Big++
		if f := rd.out.Final(t); f != nil && f.Status == run.StatusFailed && strings.HasPrefix(f.Error, "result_too_large") {
			rep.TooLarge++
		}
	}
	files, err := filepath.Glob(filepath.Join(r.dir, "sink", "*.log"))
	if err != nil {
		return nil, err
	}
	var all, keyed []Effect
	for _, f := range files {
		skill := strings.TrimSuffix(filepath.Base(f), ".log")
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		done, begun, err := ParseEffects(skill, fh)
		fh.Close()
		if err != nil {
			return nil, err
		}
		all = append(all, done...)
		if skill == keyedSkill {
			keyed = done
		}
		rep.Effects += len(done)
		rep.Interrupted += begun - len(done)
		if limit, ok := declared[skill]; ok && r.cfg.Limited {
			rep.Declared[skill], rep.MaxConcurrent[skill] = limit, MaxConcurrent(done)
		}
	}
	r.mu.Lock()
	rep.Faults, rep.Outages, rep.names, rep.kills = r.faults, slices.Clone(r.outages), maps.Clone(r.names), maps.Clone(r.kills)
	rep.Disk = r.disk
	if rep.Disk.Skipped == "" && !r.diskDone {
		rep.Disk.Skipped = "NOT RUN: the faults stopped before a third of the triggers were published"
	}
	rep.Disk.count(r.main, r.sent, main)
	rep.Keyed = CountKeyed(rd.out, r.keyed, maps.Clone(r.cancels), keyed)
	if rep.Keyed.Lost > 0 {
		r.mu.Unlock()
		rep.KeyedRecords = r.lostKeyedRecords(ctx, rd.out)
		r.mu.Lock()
	}
	for _, p := range append([]*proc{r.registry, r.router, r.server}, r.workers...) {
		p.mu.Lock()
		rep.Faults.Exits += p.crashes
		p.mu.Unlock()
	}
	r.mu.Unlock()
	for i, e := range all {
		if pid, err := strconv.Atoi(strings.TrimPrefix(e.Worker, "pid")); err == nil && strings.HasPrefix(e.Worker, "pid") {
			if name, ok := rep.names[pid]; ok {
				all[i].Worker = name
			}
		}
	}
	rep.Parked = killParked(filepath.Join(r.dir, "sink"))
	rep.Repeats = Repeats(all, rep.kills, r.cfg.Grace)
	for _, x := range rep.Repeats {
		switch {
		case x.Concurrent:
			rep.Concurrent++
		case x.Killed:
			rep.Killed++
		default:
			rep.Unexplained++
			for _, c := range x.Copies[:len(x.Copies)-1] {
				if rep.outage(c.Start, c.End.Add(10*time.Second)) != "" {
					rep.NearOutage++
					break
				}
			}
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, c := range []struct{ stream, name string }{
		{r.b.StreamTriggers(), "router"}, {r.b.StreamJobs(), "worker-default"}, {r.b.StreamJobs(), "worker-solo-chaos-limited"}, {r.b.StreamJobs(), "worker-slow"},
	} {
		cons, err := r.b.Consumer(cctx, c.stream, c.name)
		if err != nil {
			continue
		}
		info, err := cons.Info(cctx)
		if err == nil {
			rep.Pending[c.name] = info.NumPending + uint64(info.NumAckPending)
		}
	}
	return rep, nil
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	line := func(name string, v any, note string) {
		if note != "" {
			note = "   (" + note + ")"
		}
		fmt.Fprintf(w, "%-34s %v%s\n", name+":", v, note)
	}
	line("triggers", r.Triggers, "")
	line("completed", r.Completed, "")
	var why []string
	for _, k := range slices.Sorted(maps.Keys(r.Failures)) {
		why = append(why, fmt.Sprintf("%d %s", r.Failures[k], k))
	}
	line("failed", r.Failed, strings.Join(why, ", "))
	line("lost", r.Lost, "")
	line("duplicate terminals", r.Duplicates, "")
	line("side effects run more than once", r.Unexplained+r.Concurrent,
		fmt.Sprintf("%d concurrent copies, %d ran just before or during a nats-server outage; not counted: %d re-run after the worker running them was SIGKILLed mid-step",
			r.Concurrent, r.NearOutage, r.Killed))
	if len(r.MaxConcurrent) == 0 {
		line("max concurrent chaos-limited", "-", "not in the mix: run with -limited")
	}
	for _, s := range slices.Sorted(maps.Keys(r.MaxConcurrent)) {
		line("max concurrent "+s, r.MaxConcurrent[s], fmt.Sprintf("max_concurrent %d", r.Declared[s]))
	}
	line("result_too_large", fmt.Sprintf("%d of %d", r.TooLarge, r.Big), "chaos-big: failed once, fatally")
	line("side effects", r.Effects, fmt.Sprintf("%d more began and were cut off", r.Interrupted))
	line("exec processes parked", r.Parked, "their worker died as it started them: stopped before running, then killed")
	f := r.Faults
	line("faults", fmt.Sprintf("worker SIGKILL %d, router SIGKILL %d, registry SIGKILL %d, nats-server SIGKILL %d, nats-server SIGTERM %d",
		f.WorkerKills, f.RouterKills, f.RegistryKills, f.ServerKills, f.ServerTerms), "")
	r.printFlow(line)
	r.Disk.print(line)
	line("duplicate publishes", f.DuplicatePublishes, fmt.Sprintf("in %d bursts; same CloudEvent source and id, new Nats-Msg-Id", f.DuplicateBursts))
	line("publish retries", f.PublishRetries, "")
	line("processes that exited by themselves", f.Exits, "and were started again")
	var pend []string
	for _, k := range slices.Sorted(maps.Keys(r.Pending)) {
		pend = append(pend, fmt.Sprintf("%s %d", k, r.Pending[k]))
	}
	line("unacknowledged at the end", strings.Join(pend, ", "), "")
	line("seed", r.Seed, "")
	line("wall time", r.Wall.Round(time.Second), "")
	if r.Dir != "" {
		line("logs", r.Dir, "")
	}
	if r.Store != "" {
		line("store", r.Store, "kept: nats-server -js -sd "+r.Store+" serves its streams")
	}
	for _, l := range r.KeyedRecords {
		fmt.Fprintln(w, l)
	}
	for _, id := range r.LostIDs {
		fmt.Fprintf(w, "lost: trigger %s\n", id)
	}
	for _, id := range r.Conflicting {
		fmt.Fprintf(w, "conflicting outcomes: execution %s\n", id)
	}
	for _, id := range r.Keyed.LostIDs {
		fmt.Fprintf(w, "lost: %s trigger %s\n", keyedSkill, id)
	}
	for _, n := range r.Debounce.Twice {
		fmt.Fprintf(w, "ran twice: %s trigger t-%d's data\n", debouncedSkill, n)
	}
	for _, key := range r.Debounce.LastLost {
		fmt.Fprintf(w, "never ran: %s key %s's last trigger\n", debouncedSkill, key)
	}
	shown := 0
	for _, x := range r.Repeats {
		if x.Killed && !x.Concurrent || shown >= 20 {
			continue
		}
		shown++
		fmt.Fprintf(w, "repeated: %s execution %s step %s:\n", x.Copies[0].Skill, x.Execution, x.Step)
		for _, c := range x.Copies {
			kill := ""
			if k, ok := r.kills[c.Worker]; ok {
				kill = fmt.Sprintf(", worker SIGKILLed %s–%s (signal sent, exit seen)", k.Sent.Format("15:04:05.000"), k.Exited.Format("15:04:05.000"))
			}
			fmt.Fprintf(w, "  attempt %d on %s %s–%s%s%s\n", c.Attempt, c.Worker,
				c.Start.Format("15:04:05.000000"), c.End.Format("15:04:05.000000"), kill, r.outage(c.Start, c.End.Add(5*time.Second)))
		}
	}
}

// outage names a server outage overlapping [from, to].
func (r *Report) outage(from, to time.Time) string {
	for _, o := range r.Outages {
		if o[0].Before(to) && o[1].After(from) {
			return fmt.Sprintf(", nats-server down %s–%s", o[0].Format("15:04:05.000"), o[1].Format("15:04:05.000"))
		}
	}
	return ""
}

// killParked kills the exec processes of this run (their environment names the
// sink) that are stopped in ptrace, where a process whose worker died while
// starting it stays, and returns how many there were.
func killParked(sink string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil || !strings.Contains(string(status), "\nState:\tt (tracing stop)") {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(env), "="+sink+"/") {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
