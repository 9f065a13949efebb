package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := cli.Skillbus(context.Background(), []string{"version"}, noEnv, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "skillbus ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Errorf("skillbus version: %q", out.String())
	}
	for name, main := range mains() {
		out.Reset()
		if err := main(context.Background(), []string{"--version"}, noEnv, &out, &out); err != nil {
			t.Fatalf("%s --version: %v", name, err)
		}
		if !strings.HasPrefix(out.String(), name+" ") || !strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("%s --version: %q", name, out.String())
		}
	}
}

// With no command, skillbus says what there is and exits 2.
func TestNoCommand(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	err := cli.Skillbus(context.Background(), nil, noEnv, &out, &errOut)
	if cli.ExitCode(err) != 2 || !strings.Contains(errOut.String(), "Available Commands") || out.Len() != 0 {
		t.Fatalf("exit %d (%v)\nstdout: %s\nstderr: %s", cli.ExitCode(err), err, out.String(), errOut.String())
	}
}

// startRouter runs the router on url, logging as text. exited reports whether it
// has stopped by itself; stop ends it, which must go without error: defer it, so it
// runs before the test's server is shut down.
func startRouter(t *testing.T, url string) (logs *natstest.Buffer, exited func() bool, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &natstest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- cli.Router(ctx, []string{"--nats-url", url, "--log-format", "text"}, noEnv, logs, logs)
	}()
	var err error
	ended := false
	stop = func() {
		cancel()
		if !ended {
			err, ended = <-done, true
		}
		if err != nil {
			t.Errorf("router: %v", err)
		}
	}
	return logs, func() bool {
		if !ended {
			select {
			case e := <-done:
				err, ended = e, true
			default:
			}
		}
		return ended
	}, stop
}

// A service started before NATS waits for it, saying so, and then logs every
// disconnect and reconnect with the server.
func TestWaitsForNATSAndLogsReconnects(t *testing.T) {
	t.Parallel()
	port := natstest.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	logs, _, stop := startRouter(t, url)
	defer stop()
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for NATS") }, "no 'waiting for NATS' line:\n%s", logs)
	if !strings.Contains(logs.String(), "url="+url) {
		t.Errorf("the waiting line does not name the URL:\n%s", logs)
	}
	srv := natstest.StartWith(t, func(o *server.Options) { o.Port = port })
	natstest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), "router: running") }, "the router did not start once NATS was up:\n%s", logs)
	srv.Restart()
	natstest.Eventually(t, 30*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="NATS disconnected; reconnecting" server=`+url) && strings.Contains(l, `msg="NATS reconnected" server=`+url)
	}, "no disconnect and reconnect lines naming the server:\n%s", logs)
}

// A server that goes away in the middle of the handshake (its connections reset
// before INFO, as when it is killed while a service starts) is waited for like one
// not listening yet: the service does not exit.
func TestWaitsForNATSThatResetsConnections(t *testing.T) {
	t.Parallel()
	port := natstest.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
			c.Close()
		}
	}()
	logs, exited, stop := startRouter(t, url)
	defer stop()
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Count(logs.String(), "waiting for NATS") >= 2 },
		"no two 'waiting for NATS' lines while the server resets connections:\n%s", logs)
	if exited() {
		t.Fatalf("the router exited:\n%s", logs)
	}
	ln.Close()
	natstest.StartWith(t, func(o *server.Options) { o.Port = port })
	natstest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), "router: running") }, "the router did not start once NATS was up:\n%s", logs)
}

// mTLS: a server that verifies client certificates takes skillbus with --tls-ca,
// --tls-cert and --tls-key (or their variables), and refuses it without.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	certs := natstest.NewCerts(t)
	srv := natstest.StartWith(t, func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certs.ServerCert, KeyFile: certs.ServerKey, CaFile: certs.CA, Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true
	})
	url := strings.Replace(srv.URL(), "nats://", "tls://", 1)
	env := map[string]string{"SKILLBUS_NATS_URL": url, "SKILLBUS_NATS_CA": certs.CA, "SKILLBUS_NATS_CERT": certs.ClientCert, "SKILLBUS_NATS_KEY": certs.ClientKey}
	getenv := func(k string) string { return env[k] }
	var out bytes.Buffer
	if err := cli.Registry(context.Background(), []string{"--once", "--skills", filepath.Join("..", "..", "testdata", "skills"), "--log-level", "error"}, getenv, &out, &out); err != nil {
		t.Fatalf("registry over mTLS: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := cli.Skillbus(context.Background(), []string{"skills", "list", "--nats-url", url, "--tls-ca", certs.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey}, noEnv, &out, &out); err != nil || !strings.Contains(out.String(), "hello") {
		t.Fatalf("skills list over mTLS with flags: %v\n%s", err, out.String())
	}
	other := natstest.NewCerts(t)
	for name, args := range map[string][]string{
		"no client certificate":       {"--tls-ca", certs.CA},
		"another CA":                  {"--tls-ca", other.CA, "--tls-cert", certs.ClientCert, "--tls-key", certs.ClientKey},
		"a certificate of another CA": {"--tls-ca", certs.CA, "--tls-cert", other.ClientCert, "--tls-key", other.ClientKey},
	} {
		out.Reset()
		err := cli.Skillbus(context.Background(), append([]string{"runs", "list", "--nats-url", url}, args...), noEnv, &out, &out)
		if err == nil || !strings.Contains(err.Error(), "--tls-cert") && !strings.Contains(err.Error(), "connect to NATS") {
			t.Errorf("%s: err = %v, want a refused connection that points at the TLS flags", name, err)
		}
	}
	out.Reset()
	err := cli.Skillbus(context.Background(), []string{"runs", "list", "--nats-url", url, "--tls-cert", certs.ClientCert}, noEnv, &out, &out)
	if cli.ExitCode(err) != 2 || !strings.Contains(err.Error(), "--tls-key") {
		t.Errorf("--tls-cert without --tls-key: %v", err)
	}
}

// An nkey seed file authenticates as the nkey user.
func TestNkey(t *testing.T) {
	t.Parallel()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := natstest.StartWith(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	var out bytes.Buffer
	err = cli.Registry(context.Background(), []string{"--once", "--skills", filepath.Join("..", "..", "testdata", "skills"), "--log-level", "error", "--nats-url", srv.URL()},
		func(k string) string { return map[string]string{"SKILLBUS_NATS_NKEY": seedFile}[k] }, &out, &out)
	if err != nil {
		t.Fatalf("registry with an nkey: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := cli.Skillbus(context.Background(), []string{"skills", "list", "--nats-url", srv.URL(), "--nkey", seedFile}, noEnv, &out, &out); err != nil || !strings.Contains(out.String(), "hello") {
		t.Fatalf("skills list --nkey: %v\n%s", err, out.String())
	}
	err = cli.Skillbus(context.Background(), []string{"skills", "list", "--nats-url", srv.URL()}, noEnv, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--nkey") {
		t.Errorf("without the nkey: %v, want an authorization error pointing at --nkey", err)
	}
}

// $SKILLBUS_NATS_PASSWORD alone signs in as user skillbus, the user skillbus dev
// makes; a refused password says which user was tried and where the user comes from.
func TestAPasswordAloneIsUserSkillbus(t *testing.T) {
	t.Parallel()
	srv := natstest.StartWith(t, func(o *server.Options) {
		o.Users = []*server.User{{Username: "skillbus", Password: "pw-0123456789"}, {Username: "operator", Password: "op-0123456789"}}
	})
	env := func(kv ...string) cli.Env {
		m := map[string]string{"SKILLBUS_NATS_URL": srv.URL()}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	var out bytes.Buffer
	if err := cli.Registry(context.Background(), []string{"--once", "--skills", filepath.Join("..", "..", "testdata", "skills"), "--log-level", "error"},
		env("SKILLBUS_NATS_PASSWORD", "pw-0123456789"), &out, &out); err != nil {
		t.Fatalf("registry with only $SKILLBUS_NATS_PASSWORD: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := cli.Skillbus(context.Background(), []string{"skills", "list"}, env("SKILLBUS_NATS_USER", "operator", "SKILLBUS_NATS_PASSWORD", "op-0123456789"), &out, &out); err != nil ||
		!strings.Contains(out.String(), "hello") {
		t.Fatalf("skills list as operator: %v\n%s", err, out.String())
	}
	out.Reset()
	err := cli.Skillbus(context.Background(), []string{"skills", "list"}, env("SKILLBUS_NATS_PASSWORD", "op-0123456789"), &out, &out)
	if err == nil || !strings.Contains(err.Error(), "user skillbus") || !strings.Contains(err.Error(), "$SKILLBUS_NATS_USER") {
		t.Errorf("another user's password without $SKILLBUS_NATS_USER: %v, want an error naming user skillbus and $SKILLBUS_NATS_USER", err)
	}
}

// A start-up that the server leaves unanswered (its requests time out) is tried
// again until it succeeds; one that fails for another reason is not.
func TestStartRetryWaitsOutAnUnansweringServer(t *testing.T) {
	t.Parallel()
	var logs natstest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	calls := 0
	err := cli.StartRetry(context.Background(), log, "router", func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("router: consumer: %w", context.DeadlineExceeded)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls, want success at the third", err, calls)
	}
	if !strings.Contains(logs.String(), "start-up interrupted; NATS is not answering") {
		t.Errorf("no retry logged:\n%s", logs.String())
	}
	bad := errors.New("router: --router-concurrency must be positive")
	calls = 0
	if err := cli.StartRetry(context.Background(), log, "router", func() error { calls++; return bad }); !errors.Is(err, bad) || calls != 1 {
		t.Fatalf("a configuration error: %v after %d calls, want it at once", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cli.StartRetry(ctx, log, "router", func() error { return context.DeadlineExceeded }); err == nil {
		t.Fatal("a cancelled start-up succeeded")
	}
}

// A credentials or TLS file that is not there is named as such, not as a server
// that is not running, and nothing waits for it.
func TestMissingConnectionFileSaysSo(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nope")
	for _, flag := range []string{"--creds", "--tls-ca"} {
		out, code := run(t, flag, missing, "skills", "list")
		if code != 1 || !strings.Contains(out, "no such file or directory (a file the connection needs: check --creds") {
			t.Errorf("%s: exit %d: %s", flag, code, out)
		}
	}
}

// The console started before NATS waits for it too, as the other services do,
// and serves once NATS is up.
func TestConsoleWaitsForNATS(t *testing.T) {
	t.Parallel()
	port := natstest.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	logs := &natstest.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- cli.Skillbus(ctx, []string{"console", "--nats-url", url, "--listen", "127.0.0.1:0", "--log-format", "text"}, noEnv, logs, logs)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("console: %v", err)
		}
	}()
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for NATS") }, "no 'waiting for NATS' line:\n%s", logs)
	select {
	case err := <-done:
		t.Fatalf("the console exited before NATS was up: %v\n%s", err, logs)
	default:
	}
	srv := natstest.StartWith(t, func(o *server.Options) { o.Port = port })
	natstest.Eventually(t, 20*time.Second, func() bool { return strings.Contains(logs.String(), "waiting for the registry") }, "no 'waiting for the registry' line:\n%s", logs)
	srv.Bus(t, bus.Config{}) // creates the streams and buckets, as the registry does
	natstest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), "http://127.0.0.1:") }, "the console did not serve once NATS and the streams were up:\n%s", logs)
}
