package natsperm_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/internal/natsperm"
)

// composeFile is the part of a compose file these tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Profiles    []string          `yaml:"profiles"`
	DependsOn   []string          `yaml:"depends_on"`
}

func readCompose(t *testing.T, name string) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), name))
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// composeRoles is the NATS user each skillbus service of docker-compose.yml must
// connect as.
var composeRoles = map[string]string{
	"registry": "registry",
	"router":   "router",
	"worker":   "worker",
	"repair":   "repair",
	"cli":      "operator",
	"gateway":  "gateway",
}

// devPasswords are the development passwords, as the dev overlay's generated
// Secret holds them.
func devPasswords(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(natsperm.DevSecret(natsperm.Roles("skillbus")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out
}

var defaulted = regexp.MustCompile(`^\$\{([A-Z_]+):-([^}]*)\}$`)

// composePassword resolves a compose value of the form ${VAR:-default} as compose does
// with VAR unset, checking that VAR is the one named.
func composePassword(t *testing.T, where, value, wantVar string) string {
	t.Helper()
	m := defaulted.FindStringSubmatch(value)
	if m == nil || m[1] != wantVar {
		t.Fatalf("%s: %q, want ${%s:-<development password>}", where, value, wantVar)
	}
	return m[2]
}

// Every skillbus service of docker-compose.yml connects as the user of its role,
// with the password variable of that role, and the NATS node defines every role's
// password variable with the same default; a service whose role may not create
// streams runs with --ensure=false. Then a server started from the compose node's
// configuration (deploy/nats/single.conf with the generated users) accepts each
// service's user and password.
func TestComposeUsers(t *testing.T) {
	f := readCompose(t, "docker-compose.yml")
	dev := devPasswords(t)
	roles := map[string]natsperm.Role{}
	for _, r := range natsperm.Roles("skillbus") {
		roles[r.Name] = r
	}

	node, ok := f.Services["nats"]
	if !ok {
		t.Fatal("docker-compose.yml: no service nats")
	}
	for name, r := range roles {
		v, ok := node.Environment[r.PasswordVar()]
		if !ok {
			t.Fatalf("service nats: no %s for the user %s", r.PasswordVar(), name)
		}
		if got := composePassword(t, "service nats: "+r.PasswordVar(), v, r.PasswordVar()); got != dev[r.PasswordVar()] {
			t.Errorf("service nats: %s defaults to %q, the dev overlay's Secret to %q", r.PasswordVar(), got, dev[r.PasswordVar()])
		}
	}
	if !slices.Contains(node.Volumes, "./deploy/nats:/etc/nats:ro") {
		t.Errorf("service nats: deploy/nats is not mounted at /etc/nats: %v", node.Volumes)
	}

	creds := map[string]string{} // user -> password
	for name, s := range f.Services {
		if s.Image != "skillbus:dev" {
			continue
		}
		want, ok := composeRoles[name]
		if !ok {
			t.Errorf("service %s runs skillbus but this test does not know its role: add it to composeRoles", name)
			continue
		}
		user := s.Environment["SKILLBUS_NATS_USER"]
		if user != want {
			t.Errorf("service %s: SKILLBUS_NATS_USER %q, want %q", name, user, want)
			continue
		}
		r := roles[user]
		pw := composePassword(t, "service "+name+": SKILLBUS_NATS_PASSWORD", s.Environment["SKILLBUS_NATS_PASSWORD"], r.PasswordVar())
		if pw != dev[r.PasswordVar()] {
			t.Errorf("service %s: password defaults to %q, the node's to %q", name, pw, dev[r.PasswordVar()])
		}
		if s.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://jaeger:4318" {
			t.Errorf("service %s: does not export traces to Jaeger (the shared environment was replaced?)", name)
		}
		if s.Environment["SKILLBUS_NATS_URL"] != "nats://nats:4222" {
			t.Errorf("service %s: SKILLBUS_NATS_URL %q", name, s.Environment["SKILLBUS_NATS_URL"])
		}
		manages := slices.Contains(r.Publish, "$JS.API.>")
		if bin := filepath.Base(s.Entrypoint[0]); (bin == "router" || bin == "worker" || slices.Contains(s.Entrypoint, "serve")) && !manages && !slices.Contains(s.Entrypoint, "--ensure=false") {
			t.Errorf("service %s: its user %s may not create streams, so it must run with --ensure=false", name, user)
		}
		creds[user] = pw
	}
	for _, want := range composeRoles {
		if _, ok := creds[want]; !ok {
			t.Errorf("no service connects as %s", want)
		}
	}

	// The node's own configuration, as the container starts it.
	if !slices.Equal(node.Command, []string{"-c", "/etc/nats/single.conf"}) {
		t.Fatalf("service nats: command %v", node.Command)
	}
	for _, r := range roles {
		t.Setenv(r.PasswordVar(), dev[r.PasswordVar()])
	}
	opts, err := server.ProcessConfigFile(filepath.Join(repoRoot(), "deploy", "nats", "single.conf"))
	if err != nil {
		t.Fatalf("deploy/nats/single.conf: %v", err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, 0, t.TempDir(), true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	for user, pw := range creds {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, pw))
		if err != nil {
			t.Errorf("%s cannot connect with the compose password: %v", user, err)
			continue
		}
		if _, err := nc.JetStream(); err != nil {
			t.Error(err)
		}
		nc.Close()
	}
	if _, err := nats.Connect(s.ClientURL(), nats.UserInfo("worker", "wrong")); err == nil {
		t.Error("a wrong password was accepted")
	}
}

// docker-compose.cluster.yml turns the one node into the first of three: every
// node has the users' passwords and the configuration directory, each routes to
// the other two, and every skillbus service lists the three and uses replicas 3.
func TestComposeCluster(t *testing.T) {
	base := readCompose(t, "docker-compose.yml")
	over := readCompose(t, "docker-compose.cluster.yml")
	nodes := []string{"nats", "nats-2", "nats-3"}
	var urls []string
	for _, n := range nodes {
		urls = append(urls, "nats://"+n+":4222")
	}
	for _, n := range nodes {
		s, ok := over.Services[n]
		if !ok {
			t.Fatalf("docker-compose.cluster.yml: no service %s", n)
		}
		if n == "nats" { // the rest comes from docker-compose.yml
			s.Environment, s.Volumes = base.Services["nats"].Environment, base.Services["nats"].Volumes
		}
		for _, r := range natsperm.Roles("skillbus") {
			composePassword(t, n+": "+r.PasswordVar(), s.Environment[r.PasswordVar()], r.PasswordVar())
		}
		if !slices.Contains(s.Volumes, "./deploy/nats:/etc/nats:ro") {
			t.Errorf("%s: deploy/nats is not mounted: %v", n, s.Volumes)
		}
		var routes []string
		for _, o := range nodes {
			if o != n {
				routes = append(routes, "nats://"+o+":6222")
			}
		}
		want := []string{"-c", "/etc/nats/cluster.conf", "--name", n, "--routes", strings.Join(routes, ",")}
		if !slices.Equal(s.Command, want) {
			t.Errorf("%s: command %v, want %v", n, s.Command, want)
		}
	}
	for name, s := range base.Services {
		if s.Image != "skillbus:dev" {
			continue
		}
		o, ok := over.Services[name]
		if !ok {
			t.Errorf("docker-compose.cluster.yml leaves %s on the single node", name)
			continue
		}
		if o.Environment["SKILLBUS_NATS_URL"] != strings.Join(urls, ",") || o.Environment["SKILLBUS_REPLICAS"] != "3" {
			t.Errorf("%s: URL %q replicas %q in the cluster", name, o.Environment["SKILLBUS_NATS_URL"], o.Environment["SKILLBUS_REPLICAS"])
		}
		if _, user := o.Environment["SKILLBUS_NATS_USER"]; user {
			t.Errorf("%s: the cluster file must not change the service's user", name)
		}
	}
	for _, v := range []string{"nats-2", "nats-3"} {
		if _, ok := over.Volumes[v]; !ok {
			t.Errorf("docker-compose.cluster.yml: no volume %s", v)
		}
	}
	dev := devPasswords(t)
	for _, r := range natsperm.Roles("skillbus") {
		t.Setenv(r.PasswordVar(), dev[r.PasswordVar()])
	}
	// The node's name, ports, routes and store come from its environment, as
	// docker-compose.cluster.yml sets it for nats-2.
	for k, v := range over.Services["nats-2"].Environment {
		if strings.HasPrefix(k, "NATS_") {
			t.Setenv(k, v)
		}
	}
	opts, err := server.ProcessConfigFile(filepath.Join(repoRoot(), "deploy", "nats", "cluster.conf"))
	if err != nil {
		t.Fatalf("deploy/nats/cluster.conf: %v", err)
	}
	if opts.Cluster.Port != 6222 || !opts.JetStream || opts.ServerName != "nats-2" || opts.StoreDir != "/data" || len(opts.Routes) != 2 {
		t.Errorf("deploy/nats/cluster.conf: cluster port %d, JetStream %v, name %q, store %q, routes %v", opts.Cluster.Port, opts.JetStream, opts.ServerName, opts.StoreDir, opts.Routes)
	}
}
