package tool

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skillbus/skillbus/pkg/skill"
)

// Permissions are what the skill on whose behalf a tool is called may do through
// the tools that act on the world from the worker itself: http and exec. The zero
// value grants nothing, and it is what a call gets when its context carries no
// Permissions.
type Permissions struct {
	// Network allows outbound connections: requests of the http tool, and a
	// network for exec processes. Without it the http tool refuses every request,
	// and exec processes run in a network namespace of their own that holds only
	// an unconfigured loopback interface: they cannot reach the NATS server, the
	// cloud metadata service or anything else.
	Network bool
	// Env names variables of the worker's environment that exec processes get,
	// when the worker has them. Names starting with ReservedEnvPrefix are never
	// passed: they are the worker's own configuration and credentials.
	Env []string
	// Limits tighten the worker's limits on exec processes (ExecConfig.Limits)
	// for the skill; zero fields keep the worker's. A call asking for more than
	// the worker allows fails, Fatal.
	Limits Limits
	// MaxOutputBytes tightens ExecConfig.MaxOutputBytes likewise. Zero: the
	// worker's.
	MaxOutputBytes int
}

// ReservedEnvPrefix starts the names of the variables that configure skillbus's
// own processes (SKILLBUS_NATS_PASSWORD, SKILLBUS_LLM_API_KEY, ...). A skill's
// permissions cannot pass them on.
const ReservedEnvPrefix = "SKILLBUS_"

// reservedEnv are more variables no skill's permissions pass on: credentials of
// the process by other names than ReservedEnvPrefix's — OpenTelemetry's exporter
// headers (which carry its auth), and those ReserveEnv adds (a webhook's
// secret_env, in a process that serves webhooks and runs skills, as dev does).
var reservedEnv = struct {
	sync.RWMutex
	m map[string]bool
}{m: map[string]bool{
	"OTEL_EXPORTER_OTLP_HEADERS": true, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": true,
	"OTEL_EXPORTER_OTLP_METRICS_HEADERS": true, "OTEL_EXPORTER_OTLP_LOGS_HEADERS": true,
}}

// ReserveEnv makes the variables names hold secrets of this process: no skill's
// permissions pass them on, as those starting ReservedEnvPrefix.
func ReserveEnv(names ...string) {
	reservedEnv.Lock()
	defer reservedEnv.Unlock()
	for _, n := range names {
		reservedEnv.m[n] = true
	}
}

// envReserved reports whether no skill may be given the variable k.
func envReserved(k string) bool {
	if strings.HasPrefix(k, ReservedEnvPrefix) {
		return true
	}
	reservedEnv.RLock()
	defer reservedEnv.RUnlock()
	return reservedEnv.m[k]
}

type permissionsKey struct{}

// WithPermissions returns a context that makes tool calls with it act under p.
// The workflow engine and the instruction runner wrap a run's context with the
// permissions of its skill (SkillPermissions); so must anything else that calls
// these tools for a skill, such as a worker running a script skill's entrypoint.
func WithPermissions(ctx context.Context, p Permissions) context.Context {
	p.Env = slices.Clone(p.Env)
	return context.WithValue(ctx, permissionsKey{}, p)
}

// BoundPermissions are permissions made ready (BindPermissions) to be put on the
// contexts of many runs: On then costs each run a context, and not a copy of the
// permissions as well. The zero value grants nothing.
type BoundPermissions struct{ p any }

// BindPermissions readies p for On, which acts as WithPermissions(ctx, p).
func BindPermissions(p Permissions) BoundPermissions {
	p.Env = slices.Clone(p.Env)
	return BoundPermissions{p: p}
}

// On returns a context that makes tool calls with it act under b's permissions.
func (b BoundPermissions) On(ctx context.Context) context.Context {
	if b.p == nil {
		return context.WithValue(ctx, permissionsKey{}, Permissions{})
	}
	return context.WithValue(ctx, permissionsKey{}, b.p)
}

// PermissionsFrom returns the permissions a call with ctx acts under: those of
// WithPermissions, else none.
func PermissionsFrom(ctx context.Context) Permissions {
	p, _ := ctx.Value(permissionsKey{}).(Permissions)
	return p
}

// SkillPermissions are the permissions a skill's `permissions` field grants.
func SkillPermissions(s *skill.Skill) Permissions {
	if s == nil {
		return Permissions{}
	}
	var env []string
	for _, name := range s.Permissions.Environment.Allow {
		if !strings.HasPrefix(name, ReservedEnvPrefix) {
			env = append(env, name)
		}
	}
	l := s.Permissions.Limits
	return Permissions{
		Network: s.Permissions.Network.Outbound,
		Env:     env,
		Limits: Limits{
			CPUSeconds:  uint64(time.Duration(l.CPU).Round(time.Second) / time.Second),
			MemoryBytes: uint64(max(l.Memory, 0)),
			OpenFiles:   uint64(max(l.OpenFiles, 0)),
			Processes:   uint64(max(l.Processes, 0)),
		},
		MaxOutputBytes: int(min(max(l.Output, 0), math.MaxInt32)),
	}
}
