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
	"slices"
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
	delayed                                    string // bucket
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
		schedules: bucket("schedules"), ratelimits: bucket("ratelimits"), delayed: bucket("delayed"),
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

// followStream is what following a stream with ordered consumers takes: those
// acknowledge nothing (AckNone) and are pulled, so neither acks nor flow control.
func followStream(stream string) []string {
	var out []string
	for _, s := range readStream(stream) {
		if !strings.HasPrefix(s, "$JS.ACK.") && !strings.HasPrefix(s, "$JS.FC.") {
			out = append(out, s)
		}
	}
	return out
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

// storeDelayed is storing delayed triggers: creating keys at.<id> of KV delayed
// by create-only publishes, which read nothing back; no read of the bucket at
// all, since a read by subject takes wildcards (every sender's triggers).
func storeDelayed(bucket string) []string {
	return []string{"$JS.API.STREAM.INFO.KV_" + bucket, "$KV." + bucket + ".at.>"}
}
func readObj(bucket string) []string { return readStream("OBJ_" + bucket) }

// Durable is a durable consumer skillbus's own processes create and share.
type Durable struct {
	// Stream is the stream it reads; Name its name there.
	Stream, Name string
	// Owner is the role whose processes create and consume it: no other role
	// (but the registry, the administrator) may create, change, delete, pull
	// from or acknowledge on it.
	Owner string
}

// Durables returns every durable consumer of a fixed name that skillbus creates,
// under the given subject prefix. The workers' consumers of JOBS (worker-<pool>,
// one per pool, named by the skills) are not among them: no role but the worker,
// the operator and the registry may use consumers on JOBS at all.
//
// A durable consumer is a name, and NATS permissions cannot tell one consumer
// name from another except by naming it: a role that may read a stream through
// consumers of its own (CONSUMER.CREATE, MSG.NEXT on the stream) may use any
// consumer of that stream unless its name is denied. So every durable the code
// creates must be listed here; a test fails for one created and not listed.
func Durables(prefix string) []Durable {
	return newNames(prefix).durableList()
}

func (n names) durableList() []Durable {
	return []Durable{
		{Stream: n.triggers, Name: "router", Owner: "router"},
		{Stream: n.events, Name: "router-confirmations", Owner: "router"},
		{Stream: n.events, Name: "router-debounce", Owner: "router"},
		{Stream: n.events, Name: "worker-throttle", Owner: "worker"},
		{Stream: n.repair, Name: "repair", Owner: "repair"},
	}
}

// Subjects are the subjects of every operation on the consumer but reading its
// info: creating or updating it (a consumer's configuration is a create request
// on its name), deleting it, pulling its messages and acknowledging them. (The
// server also takes acks on $JS.ACK.<domain>.<account>.<stream>.<consumer>.>,
// which no role but the registry may publish; the durables are pulled, so flow
// control does not apply.)
func (d Durable) Subjects() []string {
	sc := d.Stream + "." + d.Name
	return []string{
		"$JS.API.CONSUMER.CREATE." + sc, "$JS.API.CONSUMER.CREATE." + sc + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + sc,
		"$JS.API.CONSUMER.DELETE." + sc,
		"$JS.API.CONSUMER.MSG.NEXT." + sc,
		"$JS.ACK." + sc + ".>",
	}
}

// othersDurables denies role every operation on the durables it does not own.
func (n names) othersDurables(role string) []string {
	var out []string
	for _, d := range n.durableList() {
		if d.Owner != role {
			out = append(out, d.Subjects()...)
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
// prefix ("skillbus" by default), in a fixed order. A role's denials are only those
// some subject it may publish could match.
func Roles(prefix string) []Role {
	roles := roles(prefix)
	for i, r := range roles {
		var deny []string
		for _, d := range r.DenyPublish {
			if slices.ContainsFunc(r.Publish, func(a string) bool { return overlap(a, d) }) {
				deny = append(deny, d)
			}
		}
		roles[i].DenyPublish = deny
	}
	return roles
}

// overlap reports whether some subject matches both patterns a and b.
func overlap(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(at) && i < len(bt); i++ {
		x, y := at[i], bt[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != y && x != "*" && y != "*" {
			return false
		}
	}
	return len(at) == len(bt)
}

func roles(prefix string) []Role {
	n := newNames(prefix)
	subj := events.Subjects{Prefix: prefix}
	inbox := []string{"_INBOX.>"}
	// routerOnly are subjects under one every role may publish that only routers
	// may: the runs of debounced bursts, which a router takes past the debounce.
	routerOnly := []string{subj.TriggersDebounced()}
	// ownOnly are the triggers skillbus sends from its own sources (a tick, a
	// skill tool's call, a replay of those): only its routers, workers and
	// operators may publish them, and a router takes such a source nowhere else.
	ownOnly := join(routerOnly, []string{subj.TriggersInternal()})
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
			Doc:  "Consumes triggers (durable router) and confirmation answers (durable router-confirmations); publishes plans, jobs and unroutable triggers' dead letters; resumes confirmed runs (reads and deletes paused records in KV runs, purges the pending timeout from EVENTS) and, when a parked run is cancelled, purges its scheduled resume messages from EVENTS; follows the catalog, the workers' heartbeats (which pools are served) and the outcome counts workers write to KV stats (success rates); serves the skillbus-router micro service (live route decisions); fires schedules and delayed triggers (publishes triggers; writes KV schedules: the lease and last ticks, and deletes delayed triggers once published from KV delayed, or from KV schedules where earlier versions stored them); counts rate-limited skills' triggers (writes KV ratelimits); holds debounced skills' bursts as scheduled messages in EVENTS and starts their runs (durable router-debounce); reads the info of the workers' consumers on JOBS (whether a max_concurrent skill's slots are all taken, to tell a followed run it waits) and, for a skill tool's call, its parent activation's last job on JOBS (the delegation depth, which no sender can lower); asks the registry for its list (skillbus-registry's list endpoint) when a trigger names a skill the catalog lacks, to reject it as invalid_skill with its files' errors.",
			Publish: join(jsInfo, n.streamInfos(),
				readStream(n.triggers), readStream(n.events),
				// A child call's depth: the last job of its parent activation.
				getStream(n.jobs),
				[]string{"$JS.API.STREAM.PURGE." + n.events},
				// A followed run of a max_concurrent skill: whether its pool's
				// slots are all taken (its workers' consumer's info, read only).
				[]string{"$JS.API.CONSUMER.INFO." + n.jobs + ".*"},
				readKV(n.skills), writeKV(n.runs), readKV(n.workers), readKV(n.stats), writeKV(n.schedules), writeKV(n.delayed),
				[]string{subj.AllEvents(), subj.AllLive(), subj.AllExec(), subj.AllDead(), subj.Triggers()},
				writeKV(n.ratelimits),
				// A trigger naming a skill the catalog lacks: whether its files
				// are invalid (the registry's list), to reject it with their errors.
				[]string{subj.Registry(registryapi.EndpointList)},
			),
			DenyPublish: n.othersDurables("router"),
			Subscribe:   join(inbox, []string{subj.ServiceAll(events.ServiceRouter), "$SRV.>"}),
			Responses:   true,
		},
		{
			Name: "worker",
			Doc:  "Consumes jobs (durables worker-<pool>) and the due messages of throttled runs set aside (durable worker-throttle); publishes progress and results (and activation.completed when its outcome ends the last of an activation's concurrent jobs), next and fallback jobs, dead letters and confirmation timeouts; with --repair, asks the repair service to park an execution that failed with a repairable fault (the REPAIR stream's park requests, nothing else on it); writes run records, checkpoints, cache, its outcome counts (KV stats) and its heartbeat; reads the catalog, skill files and repairs but cannot write them; calls tools on the bus and invokes skills (the skill tool publishes triggers, and reads one back from TRIGGERS when JetStream calls it a repeat); serves the skillbus-worker micro service (its status and stats).",
			Publish: join(jsInfo, n.streamInfos(),
				readStream(n.jobs), readStream(n.events),
				// A skill tool's call that JetStream took for a repeat: whether the
				// message stored under its id is that call (client.Send).
				getStream(n.triggers),
				readKV(n.skills), readObj(n.files), readKV(n.repairs),
				writeKV(n.runs), writeKV(n.cache), writeKV(n.stats), writeKV(n.workers),
				[]string{subj.AllEvents(), subj.AllLive(), subj.AllExec(), subj.RepairParked("*"), subj.AllDead(), subj.Triggers(),
					subj.ServiceAll(events.ServiceTool), "$SRV.INFO", "$SRV.INFO.>"},
			),
			DenyPublish: join(n.othersDurables("worker"), routerOnly),
			// The live events of the skills its skill tool invokes, which it
			// follows to their result as any sender does.
			Subscribe: join(inbox, []string{subj.ServiceAll(events.ServiceWorker), "$SRV.>", subj.AllLive()}),
			Responses: true,
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
			DenyPublish: join(n.othersDurables("repair"), ownOnly),
			Subscribe:   inbox,
		},
		{
			Name:        "publisher",
			Doc:         "Publishes triggers and follows them to their result (ordered consumers on EVENTS, which acknowledge nothing; direct gets on JOBS for the plan an activation's jobs carry): what any application sending events uses. Delayed triggers (trigger --at/--in) are keys at.<id> it creates in KV delayed (bounded, no roll-ups or purges) by create-only publishes; it cannot read, list or watch the bucket (a key's name is its trigger's activation id, a hash of source and id: senders are one trust domain, and one that knows another's source and id could still delete its pending trigger). It cannot publish jobs, results or anything else, nor skillbus's own triggers (a skill's .internal and .debounced subjects, where routers take skillbus's own sources), nor take jobs from workers, nor write any other bucket, nor use the services' durable consumers (router-confirmations, router-debounce, worker-throttle: no pull, ack, create, update or delete).",
			Publish:     join(jsInfo, []string{subj.Triggers()}, followStream(n.events), getStream(n.jobs), storeDelayed(n.delayed)),
			DenyPublish: join(n.othersDurables("publisher"), ownOnly),
			Subscribe:   join(inbox, []string{subj.AllLive()}),
		},
		{
			Name:        "gateway",
			Doc:         "The HTTP gateway: a publisher that also records the webhook bodies it took in KV hooks (the replay window) and, at start, waits until the streams and that bucket exist. It cannot publish jobs, results or anything else (skillbus's own triggers included), take jobs from workers, write any other bucket, or use the services' durable consumers.",
			Publish:     join(jsInfo, n.streamInfos(), []string{subj.Triggers()}, followStream(n.events), getStream(n.jobs), writeKV(n.hooks)),
			DenyPublish: join(n.othersDurables("gateway"), ownOnly),
			Subscribe:   join(inbox, []string{subj.AllLive()}),
		},
		{
			Name: "operator",
			Doc:  "The skillbus CLI of a person: triggers, skills list/show/validate (through the registry service and the catalog) and ramp/rollback, runs list/show/confirm/cancel/pause/resume, dlq list/show/replay, repair list/show/approve/reject, `nats micro` discovery and the workers' status endpoints. It reads everything and writes only triggers (and delayed ones: keys at.<id> of KV delayed, which it lists and may delete to cancel one), confirmation answers and DLQ replays: a replayed job (so it may publish jobs), and the replay's record in the DLQ and on the new execution's events; repair decisions; and execution control in KV runs: cancel requests (<execution>.cancel), paused skills (skill.<name>.hold), a skill's pending runs cancelled (skill.<name>.cancelled), version ramps (skill.<name>.ramp), and the paused, held, wait and parked records of the runs it cancels or resumes, whose jobs it publishes again. It cannot write dead letters, results, progress or repair jobs.",
			Publish: join(jsInfo, n.streamInfos(),
				[]string{subj.Triggers(), subj.EventKind(events.TypeConfirmationRecorded), subj.ServiceAll(events.ServiceRegistry), subj.ServiceAll(events.ServiceRouter), subj.ServiceAll(events.ServiceWorker), "$SRV.>"},
				[]string{subj.AllExec(), subj.Dead(events.DeadReplayed) + ".>", subj.EventKind(events.TypeDLQReplayed), subj.RepairDecided("*")},
				readStream(n.events), readStream(n.dlq), readStream(n.triggers), readStream(n.jobs),
				readKV(n.skills), readKV(n.runs), readKV(n.workers), readKV(n.stats), readKV(n.repairs), readObj(n.files),
				// Delayed triggers: the pending ones listed (runs delayed), and
				// one cancelled before it is due (a delete of its key).
				storeDelayed(n.delayed), readKV(n.delayed),
				[]string{"$KV." + n.runs + ".*.cancel", "$KV." + n.runs + ".skill.*.hold", "$KV." + n.runs + ".skill.*.cancelled", "$KV." + n.runs + ".*.paused", "$KV." + n.runs + ".*.held",
					"$KV." + n.runs + ".*.wait", "$KV." + n.repairs + ".w.>"},
				// skills ramp and rollback: a skill's ramp record.
				[]string{"$KV." + n.runs + ".skill.*.ramp"},
				[]string{"$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST", "$JS.API.CONSUMER.NAMES.>", "$JS.API.CONSUMER.LIST.>"},
			),
			DenyPublish: join(n.othersDurables("operator"), routerOnly),
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
