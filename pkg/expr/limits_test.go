package expr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/skillbus/skillbus/pkg/failure"
)

// limitDeadline is how fast a runaway evaluation must be stopped. Each runs under a
// context of a minute, so an evaluation the limits did not stop fails by far; the
// deadline leaves room for a loaded machine (a CI box shared with the NATS servers of
// other tests), where a tight one failed without anything being wrong.
const limitDeadline = time.Second * timeScale

func TestLimits(t *testing.T) {
	// Not parallel: the deadline is about this machine's two cores.
	dag := "x = [1]\nfor i in range(64):\n    x = [x, x]\n"
	tests := []struct {
		name, src string
		limit     string // what the message blames: "steps", "allocation" or "integer", or any of them
	}{
		{"infinite loop", "while True:\n    pass", "steps"},
		{"counting loop", "x = 0\nwhile True:\n    x += 1", "steps"},
		{"recursion by hand", "def f(n):\n    for i in range(n):\n        pass\n    return n\nwhile True:\n    f(1000)", "steps"},
		{"huge string", "result = 'x' * 10000000000", "allocation"},
		{"huge list", "result = [0] * 10**9", "allocation"},
		{"huge list the other way round", "result = 10**9 * [0, 1]", "allocation"},
		{"list doubling with +", "x = [0]\nwhile True:\n    x = x + x", "allocation"},
		{"list doubling with +=", "x = [0]\nwhile True:\n    x += x", "any"},
		{"list doubling with extend", "x = [0]\nwhile True:\n    x.extend(x)", "any"},
		{"list doubling with *", "x = [0]\nfor i in range(100):\n    x = x * 2", "allocation"},
		{"string doubling with +", "s = 'x'\nwhile True:\n    s = s + s", "allocation"},
		{"string doubling with +=", "s = 'x'\nwhile True:\n    s += s", "allocation"},
		{"string doubling with replace", "s = 'x'\nwhile True:\n    s = s.replace('x', 'xx')", "any"},
		{"string doubling with %", "s = 'x'\nwhile True:\n    s = '%s%s' % (s, s)", "allocation"},
		{"string doubling with format", "s = 'x'\nwhile True:\n    s = '{}{}'.format(s, s)", "allocation"},
		{"string doubling with an f-string", "s = 'x'\nwhile True:\n    s = f'{s}{s}'", "allocation"},
		{"string doubling with join", "s = 'x'\nwhile True:\n    s = ''.join([s, s])", "allocation"},
		{"string doubling with ljust", "s = 'x'\nwhile True:\n    s = s.ljust(2 * len(s) + 1)", "any"},
		{"string growing slowly", "s = 'x' * 1000000\nwhile True:\n    s = s + 'x'", "allocation"},
		{"str of a shared list", dag + "result = str(x)", "any"},
		{"repr of a shared list", dag + "result = repr(x)", "any"},
		{"json of a shared list", dag + "result = json.dumps(x)", "any"},
		{"%s of a shared list", dag + "result = '%s' % (x,)", "any"},
		{"f-string of a shared list", dag + "result = f'{x}'", "any"},
		{"tojson of a shared list", dag + "result = x | tojson", "any"},
		{"returning a shared list", dag + "result = x", "any"},
		{"fail with a shared list", dag + "fail(x)", "any"},
		{"comparing wide shared lists", "x = [1]\nfor i in range(8):\n    x = [x] * 100\nresult = x == list(x)", "steps"},
		{"searching wide shared lists", "x = [1]\nfor i in range(8):\n    x = [x] * 100\nresult = x[0] in x", "steps"},
		{"join through getattr", "s = 'x' * 1000000\nresult = getattr('', 'join')([s] * 1000)", "allocation"},
		{"materializing a range", "result = list(range(10**9))", "steps"},
		{"summing a range", "result = sum(range(10**9))", "steps"},
		{"sorting a range", "result = sorted(range(10**9))", "steps"},
		{"any over a range", "result = any([False for i in range(10**9)])", "steps"},
		{"big power", "result = 2 ** 10**9", "integer"},
		{"squaring", "x = 3\nwhile True:\n    x = x * x", "integer"},
		{"shifting", "x = 1\nwhile True:\n    x = x << 500", "integer"},
		{"scanning a big string", "s = 'x' * 10000000\nwhile True:\n    s.upper()", "steps"},
		{"searching a big string", "s = 'x' * 10000000\nwhile True:\n    'y' in s", "steps"},
		{"splitting a big string", "s = 'x,' * 4000000\nresult = s.split(',')", "any"},
		{"big string literal product", "result = 'x,' * 20000000", "allocation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParseProgram(tt.src)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			_, err = p.Run(ctx, Env{})
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("no error")
			}
			if failure.ClassOf(err) != failure.Fatal {
				t.Errorf("class %q, want fatal: %v", failure.ClassOf(err), err)
			}
			if tt.limit != "any" && !strings.Contains(err.Error(), tt.limit) {
				t.Errorf("error %q does not mention %q", err, tt.limit)
			}
			if elapsed > limitDeadline {
				t.Errorf("stopped after %v, want within %v", elapsed, limitDeadline)
			}
		})
	}
}

func TestLimitsOption(t *testing.T) {
	t.Parallel()
	p, err := ParseProgram("x = 0\nfor i in range(1000):\n    x += i\nresult = x", WithLimits(Limits{MaxSteps: 100}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "limit of 100 evaluation steps") {
		t.Errorf("Run = %v, want the step limit", err)
	}
	tm, err := ParseTemplate("{{ 'x' * 2000 }}", WithLimits(Limits{MaxAlloc: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tm.Eval(context.Background(), nil)
	if err == nil || failure.ClassOf(err) != failure.Fatal {
		t.Errorf("Eval = %v, want a fatal allocation error", err)
	}
	// The default limits allow real work.
	p, err = ParseProgram("x = 0\nfor i in range(10000):\n    x += i\nresult = [x, len(' ' * 1000000), len(','.join(['a'] * 100000)), sum(range(100000))]")
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{int64(49995000), int64(1000000), int64(199999), int64(4999950000)}, got); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	p, err := ParseProgram("while True:\n    pass", WithLimits(Limits{MaxSteps: 1 << 62}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := p.Run(ctx, nil)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop when its context was cancelled")
	}

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.Run(ctx, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 20*time.Millisecond+limitDeadline {
		t.Errorf("Run stopped after %v", elapsed)
	}

	// An already cancelled context stops even the fast path.
	tm, err := ParseTemplate("{{ inputs.x }}")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := tm.Eval(ctx, Env{"inputs": map[string]any{"x": 1}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Eval = %v, want context.Canceled", err)
	}
}

// TestConcurrent evaluates the same compiled objects from many goroutines with
// different envs; run it with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	tm, err := ParseTemplate("{{ inputs.issue_key }}-{{ summary | lower | replace(' ', '-') }}-{{ pods | map(attribute='name') | join(',') }}")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := ParseTemplate("{{ inputs.issue_key }}")
	if err != nil {
		t.Fatal(err)
	}
	cond, err := ParseExpr("pods and len(pods) > 1 and inputs.issue_key in summary")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := ParseProgram(analyzePods)
	if err != nil {
		t.Fatal(err)
	}
	val, err := CompileValue(map[string]any{"k": "{{ inputs.issue_key }}", "l": []any{"{{ summary }}"}})
	if err != nil {
		t.Fatal(err)
	}
	shared := []any{map[string]any{"name": "a", "status": "Running"}, map[string]any{"name": "b", "status": "Failed"}}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i := range 50 {
				key := fmt.Sprintf("K-%d-%d", g, i)
				env := Env{"inputs": map[string]any{"issue_key": key}, "summary": "About " + key, "pods": shared}
				if got, err := tm.Eval(ctx, env); err != nil || got != fmt.Sprintf("%s-about-%s-a,b", key, strings.ToLower(key)) {
					t.Errorf("template = %v, %v", got, err)
					return
				}
				if got, err := fast.Eval(ctx, env); err != nil || got != key {
					t.Errorf("fast template = %v, %v", got, err)
					return
				}
				if ok, err := cond.EvalBool(ctx, env); err != nil || !ok {
					t.Errorf("condition = %v, %v", ok, err)
					return
				}
				got, err := prog.Run(ctx, env)
				if err != nil || got.(map[string]any)["unhealthy_count"] != int64(1) {
					t.Errorf("program = %v, %v", got, err)
					return
				}
				v, err := val.Eval(ctx, env)
				if err != nil || v.(map[string]any)["k"] != key {
					t.Errorf("value = %v, %v", v, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
