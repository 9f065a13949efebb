// Package natsperm is the one description of what each skillbus process may publish
// and subscribe to on NATS. The NATS server configuration in deploy/, the Kubernetes
// Secret of passwords and the table in docs/operations.md are generated from it (go
// generate ./internal/natsperm), and its tests start a server with exactly these
// users and run the whole system on them, so a permission that a process needs and
// lacks fails a test instead of a deployment.
//
// The lists name JetStream's own API subjects, because every stream, consumer and
// bucket operation is a request on one: $JS.API.<verb>.<stream>... for management,
// $JS.ACK.<stream>.> for acknowledgements, $JS.FC.<stream>.> for flow-control
// replies of watchers, $KV.<bucket>.<key> for key-value writes, $O.<bucket>.> for
// object-store writes, and _INBOX.> for every reply.
package natsperm

import (
	"strings"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/events/registryapi"
)

// Role is one kind of process and the NATS user it connects as.
type Role struct {
	// Name is the role and the NATS user name: "registry", "router", ...
	Name string
	// Doc says what the role does and why it needs what it has.
	Doc string
	// Publish and Subscribe are the subjects the user may publish and subscribe to.
	Publish, Subscribe []string
	// DenyPublish are exceptions to Publish: subjects the user may not publish even
	// though an allow pattern matches them.
	DenyPublish []string
	// Responses lets the user answer requests it received (NATS micro services)
	// without a publish permission on every inbox.
	Responses bool
}

// PasswordVar is the variable that holds the role's password: in nats.conf and as a
// key of the Kubernetes Secret nats-users.
func (r Role) PasswordVar() string {
	return strings.ToUpper(strings.ReplaceAll(r.Name, "-", "_")) + "_PASSWORD"
}

// names are the stream and bucket names under a prefix, as package bus builds them.
type names struct {
	p                                          string // subject prefix
	triggers, jobs, repair, dlq, events        string // streams
	skills, runs, stats, workers, cache, files string // buckets
	repairs, hooks, schedules, ratelimits      string // buckets
}

func newNames(prefix string) names {
	up := strings.ToUpper(strings.ReplaceAll(prefix, "-", "_"))
	bucket := func(s string) string {
		if prefix == "skillbus" {
			return s
		}
		return prefix + "_" + s
	}
	return names{
		p: prefix, triggers: up + "_TRIGGERS", jobs: up + "_JOBS", repair: up + "_REPAIR", dlq: up + "_DLQ", events: up + "_EVENTS",
		skills: bucket("skills"), runs: bucket("runs"), stats: bucket("stats"), workers: bucket("workers"), cache: bucket("cache"),
		files: bucket("skill-files"), repairs: bucket("repairs"), hooks: bucket("hooks"),
		schedules: bucket("schedules"), ratelimits: bucket("ratelimits"),
	}
}

// readStream is what reading a stream takes: its info, consumers of one's own (pull
// and ordered), acks, flow control, and direct gets of single messages.
func readStream(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".>",
		"$JS.API.CONSUMER.DELETE." + stream + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
	}
}

// streamInfos lets a process that does not create the streams check that they exist
// (--ensure=false).
func (n names) streamInfos() []string {
	var out []string
	for _, s := range []string{n.triggers, n.jobs, n.repair, n.dlq, n.events} {
		out = append(out, "$JS.API.STREAM.INFO."+s)
	}
	return out
}

// getStream reads single messages of a stream (by sequence or by subject), without
// consumers.
func getStream(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
	}
}

func readKV(bucket string) []string  { return readStream("KV_" + bucket) }
func writeKV(bucket string) []string { return append(readKV(bucket), "$KV."+bucket+".>") }

// delayKV is storing delayed triggers: the keys at.<id> of KV schedules, and
// not the schedulers' lease or last ticks.
func delayKV(bucket string) []string { return append(readKV(bucket), "$KV."+bucket+".at.>") }
func readObj(bucket string) []string { return readStream("OBJ_" + bucket) }

// durables are the durable consumers the services share; no other role may create or
// change them, because a consumer's configuration is a create request on its name.
func (n names) durables(except ...string) []string {
	all := map[string]string{
		"router":               n.triggers + ".router",
		"router-confirmations": n.events + ".router-confirmations",
		"router-debounce":      n.events + ".router-debounce",
	}
	var out []string
	for _, k := range []string{"router", "router-confirmations", "router-debounce"} {
		skip := false
		for _, e := range except {
			skip = skip || e == k
		}
		if !skip {
			out = append(out, "$JS.API.CONSUMER.CREATE."+all[k]+".>", "$JS.API.CONSUMER.CREATE."+all[k], "$JS.API.CONSUMER.DELETE."+all[k])
		}
	}
	return out
}

func join(lists ...[]string) []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// Roles returns every role's permissions for an installation with the given subject
// prefix ("skillbus" by default), in a fixed order.
func Roles(prefix string) []Role {
	n := newNames(prefix)
	subj := events.Subjects{Prefix: prefix}
	inbox := []string{"_INBOX.>"}
	// routerOnly are subjects under one every role may publish that only routers
	// may: the runs of debounced bursts, which a router takes past the debounce.
	routerOnly := []string{subj.TriggersDebounced()}
	jsInfo := []string{"$JS.API.INFO"}
	return []Role{
		{
			Name: "registry",
			Doc:  "Creates and updates the streams, buckets and object store (it alone may), owns the catalog (KV skills, object store skill-files), and serves the skillbus-registry micro service.",
			Publish: join(
				[]string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"},
				[]string{"$KV." + n.skills + ".>", "$O." + n.files + ".>"},
			),
			Subscribe: join(inbox, []string{subj.ServiceAll(events.ServiceRegistry), "$SRV.>"}),
			Responses: true,
		},
		{
			Name: "router",
			Doc:  "Consumes triggers (durable router) and confirmation answers (durable router-confirmations); publishes plans, jobs and unroutable triggers' dead letters; resumes confirmed runs (reads and deletes paused records in KV runs, purges the pending timeout from EVENTS) and, when a parked run is cancelled, purges its scheduled resume messages from EVENTS; follows the catalog, the workers' heartbeats (which pools are served) and the outcome counts workers write to KV stats (success rates); serves the skillbus-router micro service (live route decisions); fires schedules and delayed triggers (publishes triggers; writes KV schedules: the lease, last ticks, delayed triggers once published); counts rate-limited skills' triggers (writes KV ratelimits); holds debounced skills' bursts as scheduled messages in EVENTS and starts their runs (durable router-debounce).",
			Publish: join(jsInfo, n.streamInfos(),
				readStream(n.triggers), readStream(n.events),
				[]string{"$JS.API.STREAM.PURGE." + n.events},
				readKV(n.skills), writeKV(n.runs), readKV(n.workers), readKV(n.stats), writeKV(n.schedules),
				[]string{subj.AllEvents(), subj.AllLive(), subj.AllExec(), subj.AllDead(), subj.Triggers()},
				writeKV(n.ratelimits),
			),
			Subscribe: join(inbox, []string{subj.ServiceAll(events.ServiceRouter), "$SRV.>"}),
			Responses: true,
		},
		{
			Name: "worker",
			Doc:  "Consumes jobs (durables worker-<pool>); publishes progress and results (and activation.completed when its outcome ends the last of an activation's concurrent jobs), next and fallback jobs, dead letters and confirmation timeouts; with --repair, asks the repair service to park an execution that failed with a repairable fault (the REPAIR stream's park requests, nothing else on it); writes run records, checkpoints, cache, its outcome counts (KV stats) and its heartbeat; reads the catalog, skill files and repairs but cannot write them; calls tools on the bus and invokes skills (the skill tool publishes triggers); serves the skillbus-worker micro service (its status and stats).",
			Publish: join(jsInfo, n.streamInfos(),
				readStream(n.jobs), readStream(n.events),
				readKV(n.skills), readObj(n.files), readKV(n.repairs),
				writeKV(n.runs), writeKV(n.cache), writeKV(n.stats), writeKV(n.workers),
				[]string{subj.AllEvents(), subj.AllLive(), subj.AllExec(), subj.RepairParked("*"), subj.AllDead(), subj.Triggers(),
					subj.ServiceAll(events.ServiceTool), "$SRV.INFO", "$SRV.INFO.>"},
			),
			DenyPublish: join(n.durables(), routerOnly),
			Subscribe:   join(inbox, []string{subj.ServiceAll(events.ServiceWorker), "$SRV.>"}),
			Responses:   true,
		},
		{
			Name: "repair",
			Doc:  "The repair service (skillbus repair serve): consumes the REPAIR stream (durable repair: workers' park requests, repair jobs, decisions); alone writes KV repairs (the repairs, the executions parked on them, the budgets); publishes repair jobs, its automatic approvals and expiries, the repairs' events and the parked executions' jobs when a repair ends; reads the catalog and skill files; asks the registry to publish an approved repair, which the registry checks against the record in KV repairs. Workers cannot write KV repairs nor decide repairs, so nothing holding a worker's credentials can forge an approved repair.",
			Publish: join(jsInfo, n.streamInfos(),
				readStream(n.repair), writeKV(n.repairs),
				readKV(n.skills), readObj(n.files),
				[]string{subj.AllEvents(), subj.AllExec(), subj.Repair("*"), subj.RepairDecided("*"),
					subj.Registry(registryapi.EndpointRepair)},
			),
			DenyPublish: join(n.durables(), routerOnly),
			Subscribe:   inbox,
		},
		{
			Name:        "publisher",
			Doc:         "Publishes triggers and follows them to their result (ordered consumers on EVENTS; direct gets on JOBS for the plan an activation's jobs carry): what any application sending events uses. Delayed triggers (trigger --at/--in) are keys at.<id> it creates in KV schedules. It cannot publish jobs, results or anything else, nor take jobs from workers, nor write any other bucket.",
			Publish:     join(jsInfo, []string{subj.Triggers()}, readStream(n.events), getStream(n.jobs), delayKV(n.schedules)),
			DenyPublish: join(n.durables(), routerOnly),
			Subscribe:   join(inbox, []string{subj.AllLive()}),
		},
		{
			Name:        "gateway",
			Doc:         "The HTTP gateway: a publisher that also records the webhook bodies it took in KV hooks (the replay window) and, at start, waits until the streams and that bucket exist. It cannot publish jobs, results or anything else, take jobs from workers, or write any other bucket.",
			Publish:     join(jsInfo, n.streamInfos(), []string{subj.Triggers()}, readStream(n.events), getStream(n.jobs), writeKV(n.hooks)),
			DenyPublish: join(n.durables(), routerOnly),
			Subscribe:   join(inbox, []string{subj.AllLive()}),
		},
		{
			Name: "operator",
			Doc:  "The skillbus CLI of a person: triggers, skills list/show/validate (through the registry service and the catalog), runs list/show/confirm/cancel/pause/resume, dlq list/show/replay, repair list/show/approve/reject, `nats micro` discovery and the workers' status endpoints. It reads everything and writes only triggers (and delayed ones: keys at.<id> of KV schedules), confirmation answers and DLQ replays: a replayed job (so it may publish jobs), and the replay's record in the DLQ and on the new execution's events; repair decisions; and execution control in KV runs: cancel requests (<execution>.cancel), paused skills (skill.<name>.hold), and the paused, held, wait and parked records of the runs it cancels or resumes, whose jobs it publishes again. It cannot write dead letters, results, progress or repair jobs.",
			Publish: join(jsInfo, n.streamInfos(),
				[]string{subj.Triggers(), subj.EventKind(events.TypeConfirmationRecorded), subj.ServiceAll(events.ServiceRegistry), subj.ServiceAll(events.ServiceRouter), subj.ServiceAll(events.ServiceWorker), "$SRV.>"},
				[]string{subj.AllExec(), subj.Dead(events.DeadReplayed) + ".>", subj.EventKind(events.TypeDLQReplayed), subj.RepairDecided("*")},
				readStream(n.events), readStream(n.dlq), readStream(n.triggers), readStream(n.jobs),
				readKV(n.skills), readKV(n.runs), readKV(n.workers), readKV(n.stats), readKV(n.repairs), readObj(n.files),
				delayKV(n.schedules),
				[]string{"$KV." + n.runs + ".*.cancel", "$KV." + n.runs + ".skill.*.hold", "$KV." + n.runs + ".*.paused", "$KV." + n.runs + ".*.held",
					"$KV." + n.runs + ".*.wait", "$KV." + n.repairs + ".w.>"},
				[]string{"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.CONSUMER.NAMES.>", "$JS.API.CONSUMER.LIST.>"},
			),
			DenyPublish: join(n.durables(), routerOnly),
			Subscribe:   join(inbox, []string{subj.AllLive()}),
		},
		{
			Name:      "tool",
			Doc:       "A process serving tools on the bus (a NATS micro service on " + subj.Tool("<name>") + "): it receives calls and answers them, nothing else.",
			Subscribe: []string{subj.ServiceAll(events.ServiceTool), "$SRV.>"},
			Responses: true,
		},
	}
}
