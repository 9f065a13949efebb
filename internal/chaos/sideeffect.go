package chaos

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A side effect is a line the skills under testdata/chaos append to a sink file from
// their exec steps: "B <execution> <step> <attempt> <pid> <start>" when the step's
// process begins and "E <execution> <step> <attempt> <pid> <start> <end>" when it has
// done its work. pid is the process's parent, the worker running the step; times
// are bash's $EPOCHREALTIME (seconds with microseconds).

// Effect is one completed run of a side-effecting step.
type Effect struct {
	Skill     string
	Execution string
	Step      string
	Attempt   int
	Worker    string // the worker process that ran it
	Start     time.Time
	End       time.Time
}

// ParseEffects reads a sink file of skill. Begin lines are counted, not returned; a
// torn last line (its process killed mid-write) is counted as begun only.
func ParseEffects(skill string, r io.Reader) (done []Effect, begun int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "B" && len(f) == 6:
			begun++
			continue
		case f[0] == "E" && len(f) == 7:
		default:
			return nil, 0, fmt.Errorf("%s sink line %d: %q is neither a begin nor an end record", skill, line, sc.Text())
		}
		e := Effect{Skill: skill, Execution: f[1], Step: f[2]}
		var errs [3]error
		e.Attempt, errs[0] = strconv.Atoi(f[3])
		e.Worker = f[4]
		e.Start, errs[1] = parseEpoch(f[5])
		e.End, errs[2] = parseEpoch(f[6])
		for _, err := range errs {
			if err != nil {
				return nil, 0, fmt.Errorf("%s sink line %d: %w", skill, line, err)
			}
		}
		done = append(done, e)
	}
	return done, begun, sc.Err()
}

func parseEpoch(s string) (time.Time, error) {
	sec, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	var ns int64
	if frac != "" {
		f, err := strconv.ParseFloat("0."+frac, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("time %q: %w", s, err)
		}
		ns = int64(math.Round(f * 1e9))
	}
	return time.Unix(n, ns), nil
}

// Repeat is a step of one execution whose side effect happened more than once.
type Repeat struct {
	Execution, Step string
	Copies          []Effect // by start time
	// Killed: every copy but the last ran on a worker SIGKILLed while the copy ran
	// or within the grace after it ended, before it could record the step as done.
	// That is the at-least-once window that a side effect's idempotency key closes.
	Killed bool
	// Concurrent: two copies ran at the same time.
	Concurrent bool
}

// Kill is when a worker process was SIGKILLed: between Sent, just before the
// signal was sent, and Exited, when its exit was seen. On a loaded machine the two
// can be tens of milliseconds apart, and the process may run a step's first
// instructions in between.
type Kill struct{ Sent, Exited time.Time }

// Kills says when each worker process (by incarnation) was SIGKILLed.
type Kills map[string]Kill

// Repeats finds every step whose side effect happened more than once and says why.
// grace is how long after a step ended its worker may die before the step is
// recorded (the checkpoint or outcome publish and its acknowledgement).
func Repeats(effects []Effect, kills Kills, grace time.Duration) []Repeat {
	by := map[[2]string][]Effect{}
	for _, e := range effects {
		k := [2]string{e.Execution, e.Step}
		by[k] = append(by[k], e)
	}
	var out []Repeat
	for k, cs := range by {
		if len(cs) < 2 {
			continue
		}
		slices.SortFunc(cs, func(a, b Effect) int { return a.Start.Compare(b.Start) })
		r := Repeat{Execution: k[0], Step: k[1], Copies: cs, Killed: true}
		for i, c := range cs {
			if i > 0 && c.Start.Before(cs[i-1].End) {
				r.Concurrent = true
			}
			if i == len(cs)-1 {
				break
			}
			// Explained when the worker died while the step ran or within grace
			// after: its kill was under way at some moment of [Start, End+grace].
			k, ok := kills[c.Worker]
			if !ok || !k.Exited.After(c.Start) || k.Sent.After(c.End.Add(grace)) {
				r.Killed = false
			}
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Repeat) int { return a.Copies[0].Start.Compare(b.Copies[0].Start) })
	return out
}

// MaxConcurrent is the largest number of effects that were running at one moment.
func MaxConcurrent(effects []Effect) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(effects))
	for _, e := range effects {
		edges = append(edges, edge{e.Start, 1}, edge{e.End, -1})
	}
	// At equal times an end comes before a start: back-to-back runs do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}
