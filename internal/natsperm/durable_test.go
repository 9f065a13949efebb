package natsperm_test

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natsperm"
	"github.com/skillbus/skillbus/internal/natstest"
)

// durableSites are the places in the code that configure a durable consumer (a
// jetstream.ConsumerConfig literal with a Durable field, or an assignment to a
// Durable field), by file and function, and the durable of natsperm.Durables each
// one creates. "JOBS" marks the workers' pool consumers of JOBS, "bench" the
// benchmark's own streams on a server of its own.
var durableSites = map[string]string{
	"pkg/router/router.go:New":                          "router", // the default of router.Config.Durable
	"pkg/router/router.go:ConsumerConfig":               "router",
	"pkg/router/confirm.go:ConfirmationsConsumerConfig": "router-confirmations",
	"pkg/router/debounce.go:DebounceConsumerConfig":     "router-debounce",
	"pkg/worker/throttlewait.go:DueConsumerConfig":      "worker-throttle",
	"pkg/repair/service/service.go:ConsumerConfig":      "repair",
	"pkg/worker/worker.go:ConsumerConfig":               "JOBS",
	"internal/bench/baseline.go:startBaseline":          "bench",
}

// Every durable consumer the code configures is one natsperm knows, so that no
// role but its owner may use it: a durable added without being listed fails here.
func TestEveryDurableIsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, d := range natsperm.Durables("skillbus") {
		listed[d.Name] = true
	}
	found := map[string]bool{}
	fset := token.NewFileSet()
	for _, dir := range []string{"pkg", "internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repoRoot(), dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repoRoot(), path)
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok {
					continue
				}
				ast.Inspect(fn, func(n ast.Node) bool {
					if !configuresDurable(n) {
						return true
					}
					site := filepath.ToSlash(rel) + ":" + fn.Name.Name
					found[site] = true
					name, ok := durableSites[site]
					switch {
					case !ok:
						t.Errorf("%s configures a durable consumer this test does not know: list it in natsperm.Durables (so that other roles may not use it) and in durableSites", fset.Position(n.Pos()))
					case name != "JOBS" && name != "bench" && !listed[name]:
						t.Errorf("%s: durable %s is not in natsperm.Durables", site, name)
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for site := range durableSites {
		if !found[site] {
			t.Errorf("%s no longer configures a durable consumer: update durableSites", site)
		}
	}
}

// configuresDurable reports whether n is a jetstream.ConsumerConfig literal with a
// Durable field, or an assignment to a field Durable.
func configuresDurable(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.CompositeLit:
		sel, ok := n.Type.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "ConsumerConfig" {
			return false
		}
		for _, e := range n.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "Durable" {
					return true
				}
			}
		}
	case *ast.AssignStmt:
		for _, l := range n.Lhs {
			if sel, ok := l.(*ast.SelectorExpr); ok && sel.Sel.Name == "Durable" {
				return true
			}
		}
	}
	return false
}

// match reports whether the subject matches the permission pattern p, as
// nats-server matches them.
func match(p, subject string) bool {
	pt, st := strings.Split(p, "."), strings.Split(subject, ".")
	for i, x := range pt {
		if x == ">" {
			return len(st) > i
		}
		if i >= len(st) || (x != "*" && x != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// allowed reports whether role may publish subject, as nats-server decides: an
// allow pattern matches it and no deny pattern does.
func allowed(r natsperm.Role, subject string) bool {
	m := func(p string) bool { return match(p, subject) }
	return slices.ContainsFunc(r.Publish, m) && !slices.ContainsFunc(r.DenyPublish, m)
}

// No role but a durable's owner (and the registry, the administrator) may create,
// update, delete, pull from or acknowledge on it; the senders acknowledge nothing
// on EVENTS (they follow it with ordered consumers, which acknowledge nothing) and
// use no consumer on JOBS.
func TestDurablesOnlyTheirOwners(t *testing.T) {
	for _, prefix := range []string{"skillbus", "acme"} {
		roles := natsperm.Roles(prefix)
		for _, d := range natsperm.Durables(prefix) {
			sc := d.Stream + "." + d.Name
			ops := []string{"$JS.API.CONSUMER.CREATE." + sc, "$JS.API.CONSUMER.CREATE." + sc + "." + prefix + ".events.*.x",
				"$JS.API.CONSUMER.DURABLE.CREATE." + sc, "$JS.API.CONSUMER.DELETE." + sc, "$JS.API.CONSUMER.MSG.NEXT." + sc,
				"$JS.ACK." + sc + ".1.7.7.1700000000000000000.0"}
			for _, r := range roles {
				for _, s := range ops {
					if r.Name == d.Owner && strings.Contains(s, ".DURABLE.") {
						continue // the owners create theirs on the current API
					}
					if want := r.Name == d.Owner || r.Name == "registry"; allowed(r, s) != want {
						t.Errorf("%s: %s: allowed %s is %v, want %v", prefix, r.Name, s, !want, want)
					}
				}
			}
		}
		events, jobs := strings.ToUpper(prefix)+"_EVENTS", strings.ToUpper(prefix)+"_JOBS"
		for _, r := range roles {
			if r.Name != "publisher" && r.Name != "gateway" {
				continue
			}
			for _, s := range []string{"$JS.ACK." + events + ".anything.1.1.1.1.0", "$JS.API.CONSUMER.MSG.NEXT." + jobs + ".worker-default",
				"$JS.API.CONSUMER.CREATE." + jobs + ".worker-default", "$JS.ACK." + jobs + ".worker-default.1.1.1.1.0"} {
				if allowed(r, s) {
					t.Errorf("%s: %s may publish %s", prefix, r.Name, s)
				}
			}
			if !allowed(r, "$JS.API.CONSUMER.MSG.NEXT."+events+".Xy3_1") || !allowed(r, "$JS.API.CONSUMER.CREATE."+events+".Xy3_1."+prefix+".events.x.>") {
				t.Errorf("%s: %s may not follow EVENTS with an ordered consumer", prefix, r.Name)
			}
		}
	}
}

// TestDurablesRefusedToOtherRoles runs the registry, a router, a worker and the
// repair service, each as its own user, lists every consumer they created, and
// then, as every other role, tries what a security probe did with a publisher's
// credentials: pull a router's confirmation answers, acknowledge them, recreate
// the workers' consumer of throttled runs with another deliver policy, and
// delete it. Each must be refused, and the consumers must be left as they were.
func TestDurablesRefusedToOtherRoles(t *testing.T) {
	url, v := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := &fleet{t: t, ctx: ctx, url: url, v: v, ledger: &ledger{}, skills: t.TempDir()}
	copySkill(t, f.skills, "hello")
	f.service(cli.Registry, "registry", "--skills", f.skills)
	admin, err := jetstream.New(f.conn("registry"))
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		_, err := admin.KeyValue(ctx, "repairs")
		return err == nil
	}, "the registry did not create the buckets")
	f.service(cli.Router, "router", "--ensure=false")
	f.service(cli.Worker, "worker", "--ensure=false", "--name", "w-durable")
	f.service(func(ctx context.Context, args []string, env cli.Env, o, e io.Writer) error {
		return cli.Skillbus(ctx, append([]string{"repair", "serve"}, args...), env, o, e)
	}, "repair", "--ensure=false")

	listed := map[string]natsperm.Durable{}
	for _, d := range natsperm.Durables("skillbus") {
		listed[d.Stream+"/"+d.Name] = d
	}
	// What the fleet created once it has started.
	existing := map[string]jetstream.ConsumerConfig{}
	natstest.Eventually(t, 30*time.Second, func() bool {
		existing = map[string]jetstream.ConsumerConfig{}
		for name := range admin.StreamNames(ctx).Name() {
			st, err := admin.Stream(ctx, name)
			if err != nil {
				return false
			}
			for info := range st.ListConsumers(ctx).Info() {
				if info.Config.Durable != "" {
					existing[name+"/"+info.Name] = info.Config
				}
			}
		}
		for k := range listed {
			if _, ok := existing[k]; !ok {
				return false
			}
		}
		return true
	}, "the fleet did not create every durable: %v", v.lines)
	for k := range existing {
		if _, ok := listed[k]; !ok && !strings.HasPrefix(k, "SKILLBUS_JOBS/worker-") {
			t.Errorf("the fleet created the durable consumer %s, which natsperm.Durables does not list", k)
		}
	}
	if t.Failed() {
		return
	}
	f.clean("registry", "start the fleet")
	f.v.take()

	roles := natsperm.Roles("skillbus")
	// The senders first: what the probe did.
	slices.SortStableFunc(roles, func(a, b natsperm.Role) int {
		sender := func(r natsperm.Role) bool { return r.Name == "publisher" || r.Name == "gateway" }
		switch {
		case sender(a) && !sender(b):
			return -1
		case sender(b) && !sender(a):
			return 1
		}
		return 0
	})
	for _, r := range roles {
		if r.Name == "registry" {
			continue
		}
		nc := f.conn(r.Name)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range listed {
			if d.Owner == r.Name {
				continue
			}
			sc := d.Stream + "." + d.Name
			refused := func(action, subject string, do func(ctx context.Context) error) {
				t.Helper()
				// A refused request is never answered: the action ends once the
				// server has logged the violation.
				c, cc := context.WithTimeout(ctx, 5*time.Second)
				defer cc()
				go func() {
					for {
						logged := v.logged()
						if v.has(r.Name, subject) {
							cc()
							return
						}
						select {
						case <-c.Done():
							return
						case <-logged:
						}
					}
				}()
				f.denied(r.Name, action+" "+d.Name, subject, do(c))
			}
			refused("pull from", "$JS.API.CONSUMER.MSG.NEXT."+sc, func(c context.Context) error {
				m, err := nc.RequestWithContext(c, "$JS.API.CONSUMER.MSG.NEXT."+sc, []byte(`{"batch":1,"no_wait":true}`))
				if err == nil {
					return errors.New("answered: " + m.Header.Get("Status") + " " + m.Header.Get("Description"))
				}
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
					return errors.New("no answer: " + err.Error())
				}
				return err
			})
			ack := "$JS.ACK." + sc + ".1.1.1.1700000000000000000.0"
			refused("acknowledge on", ack, func(context.Context) error {
				if err := nc.Publish(ack, []byte("+ACK")); err != nil {
					return err
				}
				if err := nc.Flush(); err != nil {
					return err
				}
				return errors.New("an ack is a core publish: the violation log is the proof")
			})
			cfg := existing[d.Stream+"/"+d.Name]
			changed := cfg
			changed.DeliverPolicy, changed.OptStartSeq = jetstream.DeliverNewPolicy, 0
			refused("update", "$JS.API.CONSUMER.CREATE."+sc, func(c context.Context) error {
				_, err := js.UpdateConsumer(c, d.Stream, changed)
				return err
			})
			refused("delete", "$JS.API.CONSUMER.DELETE."+sc, func(c context.Context) error {
				return js.DeleteConsumer(c, d.Stream, d.Name)
			})
		}
	}
	// Left as they were.
	for k, d := range listed {
		c, err := admin.Consumer(ctx, d.Stream, d.Name)
		if err != nil {
			t.Errorf("%s: %v", k, err)
			continue
		}
		if got := c.CachedInfo().Config.DeliverPolicy; got != existing[k].DeliverPolicy {
			t.Errorf("%s: deliver policy %v, was %v", k, got, existing[k].DeliverPolicy)
		}
	}
}
