package bench

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/catalog"
	"github.com/skillbus/skillbus/pkg/router"
	"github.com/skillbus/skillbus/pkg/skill"
	"github.com/skillbus/skillbus/pkg/tool"
	"github.com/skillbus/skillbus/pkg/worker"
	"github.com/skillbus/skillbus/pkg/workflow"
)

// noopSkill is the one-step skill of the comparison.
var noopSkill = &skill.Skill{
	Name: "noop", Description: "one no-op tool step", Version: "1.0.0", Kind: skill.KindWorkflow,
	Digest: "0000000000000000000000000000000000000000000000000000000000000000",
	Workflow: &skill.Workflow{
		Inputs:  []skill.Input{{Name: "n", Type: "integer", Required: true}},
		Steps:   []skill.Step{{ID: "nothing", Tool: "noop", Args: map[string]any{"n": "{{ inputs.n }}"}}},
		Outputs: []skill.Output{{Name: "n", Value: "{{ inputs.n }}"}},
	},
}

// keyedSkill is the one-step skill under keyed concurrency: at most 2 runs at once
// per key, the triggers spread over 256 keys, so some runs wait for a slot.
var keyedSkill = func() *skill.Skill {
	s := *noopSkill
	s.Name, s.Digest = "keyed", "2222222222222222222222222222222222222222222222222222222222222222"
	s.Concurrency = []skill.Concurrency{{Key: "int(data.n) % 256", Limit: 2}}
	return &s
}()

// prioSkill is the one-step skill with a queue priority: a quarter of its runs
// queue 300 s ahead, on a lane of the pool, the rest at 0 on the pool's own
// consumer, so the worker takes its jobs through the lanes' slots.
var prioSkill = func() *skill.Skill {
	s := *noopSkill
	s.Name, s.Digest = "prio", "3333333333333333333333333333333333333333333333333333333333333333"
	s.QueuePriority = "int(data.n) % 4 == 0 ? 300 : 0"
	return &s
}()

// workflowSkill is the three-step skill: a local HTTP call, a compute step, an echo.
func workflowSkill(url string) *skill.Skill {
	return &skill.Skill{
		Name: "three", Description: "tool, compute, tool", Version: "1.0.0", Kind: skill.KindWorkflow,
		Digest:      "1111111111111111111111111111111111111111111111111111111111111111",
		Permissions: skill.Permissions{Network: skill.NetworkPermissions{Outbound: true}}, // the http step
		Workflow: &skill.Workflow{
			Inputs: []skill.Input{{Name: "n", Type: "integer", Required: true}},
			Steps: []skill.Step{
				{ID: "fetch", Tool: "http", Args: map[string]any{"url": url, "query": map[string]any{"n": "{{ inputs.n | string }}"}}},
				{ID: "shape", Condition: "fetch.status == 200", Compute: "result = {'n': inputs.n, 'count': len(fetch.body['items'])}"},
				{ID: "store", Tool: "echo", Args: map[string]any{"n": "{{ shape.n }}", "summary": "{{ shape.count }} items for {{ inputs.n }}"}},
			},
			Outputs: []skill.Output{{Name: "n", Value: "{{ inputs.n }}"}, {Name: "summary", Value: "{{ store.summary }}"}},
		},
	}
}

type skillbusSystem struct {
	js      jetstream.JetStream
	b       *bus.Bus
	ids     map[execKey]int32 // execution id → trigger number
	stops   []func()
	srv     *benchServer
	sub     *nats.Subscription
	results chan int
	skill   string
}

// runSkillbus measures skillbus running sk end to end through p: an embedded server,
// a router and a worker in this process, triggers published with plain nats.go.
func runSkillbus(ctx context.Context, cfg Config, name string, sk *skill.Skill, level events.Level, p runPlan) (Result, error) {
	s, err := startSkillbus(ctx, cfg, sk, level, p.total())
	if err != nil {
		return Result{}, err
	}
	defer s.stop()
	return measure(ctx, cfg, name, s, s.results, p)
}

// startSkillbus starts a fleet running sk that reports the first total triggers'
// results.
func startSkillbus(ctx context.Context, cfg Config, sk *skill.Skill, level events.Level, total int) (_ *skillbusSystem, err error) {
	srv, nc, cleanup, err := server(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &skillbusSystem{srv: srv, stops: []func(){cleanup}}
	// The router and the worker each on a connection of its own, as separate
	// processes would be; the driver publishes and follows on nc.
	dial := func(name string) (*bus.Bus, error) {
		c, err := bus.Connect(srv.URL(), "bench "+name)
		if err != nil {
			return nil, err
		}
		s.stops = append(s.stops, c.Close)
		return bus.New(c, bus.Config{Storage: cfg.Storage})
	}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	b, err := bus.New(nc, bus.Config{Storage: cfg.Storage})
	if err != nil {
		return nil, err
	}
	// The driver publishes with plain nats.go, as a publisher outside skillbus
	// would, with the bus's bound on pending asynchronous publishes.
	if s.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(16384)); err != nil {
		return nil, err
	}
	s.b = b
	if err := b.Ensure(ctx); err != nil {
		return nil, err
	}
	kv, err := b.KV(ctx, b.BucketSkills())
	if err != nil {
		return nil, err
	}
	s.skill = sk.Name
	v, _ := json.Marshal(sk)
	if _, err := kv.Put(ctx, sk.Name, v); err != nil {
		return nil, err
	}
	rcat, err := catalog.Watch(ctx, kv, cfg.Log)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, rcat.Stop)
	rb, err := dial("router")
	if err != nil {
		return nil, err
	}
	r, err := router.New(router.Config{Bus: rb, Catalog: rcat, Log: cfg.Log, Concurrency: cfg.Concurrency, Events: level})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { r.Stop(context.Background()) })
	wcat, err := catalog.Watch(ctx, kv, cfg.Log)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, wcat.Stop)
	eng, err := workflow.New(workflow.Config{Tools: tool.Builtins(tool.HTTPConfig{}, tool.ExecConfig{}), Log: cfg.Log})
	if err != nil {
		return nil, err
	}
	wb, err := dial("worker")
	if err != nil {
		return nil, err
	}
	w, err := worker.New(worker.Config{Bus: wb, Catalog: wcat, Engine: eng, Log: cfg.Log, Concurrency: cfg.Concurrency, Events: level})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { w.Stop(context.Background()) })

	s.ids = make(map[execKey]int32, total)
	for i := range total {
		k, _ := keyOf(events.ExecutionID("/bench", strconv.Itoa(i), sk.Name))
		s.ids[k] = int32(i)
	}
	s.results = make(chan int, 1024)
	s.sub, err = nc.Subscribe(benchSubjects.EventKind(events.TypeExecutionCompleted), func(m *nats.Msg) {
		id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, strings.TrimSuffix(benchSubjects.AllEvents(), ">")), ".")
		if k, ok := keyOf(id); ok {
			if i, ok := s.ids[k]; ok {
				s.results <- int(i)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// execKey is an execution id (32 hex digits) as the bytes it spells. The driver's
// map of them holds no pointers, so the garbage collector does not walk its
// entries: a map of strings added tens of thousands of objects to every cycle's
// marking, a cost of the measuring, not of skillbus, that the minimal pipeline's
// driver (which parses a number from the subject) does not have.
type execKey [16]byte

func keyOf(id string) (k execKey, ok bool) {
	n, err := hex.Decode(k[:], []byte(id))
	return k, err == nil && n == len(k)
}

// benchSubjects are the subjects of the benchmark's skillbus, under the default prefix.
var benchSubjects = events.Subjects{Prefix: "skillbus"}

func (s *skillbusSystem) trigger(ctx context.Context, i int) error {
	id := strconv.Itoa(i)
	m := nats.NewMsg(benchSubjects.TriggerSkill(s.skill))
	m.Header.Set(events.HeaderCESpecVersion, "1.0")
	m.Header.Set(events.HeaderCEID, id)
	m.Header.Set(events.HeaderCESource, "/bench")
	m.Header.Set(events.HeaderCEType, "io.skillbus.bench")
	m.Header.Set("Content-Type", "application/json")
	m.Header.Set(events.HeaderMsgID, id)
	m.Data = []byte(`{"n":` + id + `}`)
	_, err := s.js.PublishMsgAsync(m)
	return err
}

// msgBytes is the average size of the messages skillbus persisted: triggers, jobs
// (which JOBS keeps after they ran) and events.
func (s *skillbusSystem) msgBytes(ctx context.Context) int {
	var msgs, bytes uint64
	for _, name := range []string{s.b.StreamTriggers(), s.b.StreamJobs(), s.b.StreamEvents()} {
		st, err := s.js.Stream(ctx, name)
		if err != nil {
			continue
		}
		info, err := st.Info(ctx)
		if err != nil {
			continue
		}
		msgs += info.State.Msgs
		bytes += info.State.Bytes
	}
	if msgs == 0 {
		return 0
	}
	return int(bytes / msgs)
}

func (s *skillbusSystem) jetstream() jetstream.JetStream { return s.js }

func (s *skillbusSystem) server() *benchServer { return s.srv }

func (s *skillbusSystem) stop() {
	if s.sub != nil {
		_ = s.sub.Unsubscribe()
		close(s.results)
		s.sub = nil
	}
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}
