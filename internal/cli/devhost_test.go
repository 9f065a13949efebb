package cli_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
)

// skillbus dev --host beyond loopback serves NATS only to who has the password:
// one generated and printed, or $SKILLBUS_NATS_PASSWORD. A connection without it —
// a skill with network permission, a neighbour on the network — is refused.
func TestDevBeyondLoopbackRequiresAPassword(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"generated", nil},
		{"given", map[string]string{"SKILLBUS_NATS_USER": "ada", "SKILLBUS_NATS_PASSWORD": "given-password-0123"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			logs := &natstest.Buffer{}
			done := make(chan error, 1)
			go func() {
				done <- cli.Skillbus(ctx, []string{"dev", "--host", "0.0.0.0", "--port", "-1", "--store", t.TempDir(),
					"--skills", filepath.Join("..", "..", "testdata", "skills"), "--workers", "1", "--log-level", "warn"},
					func(k string) string { return tt.env[k] }, logs, logs)
			}()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("dev: %v", err)
				}
			}()
			re := regexp.MustCompile(`NATS +nats://0\.0\.0\.0:(\d+)`)
			natstest.Eventually(t, 60*time.Second, func() bool { return strings.Contains(logs.String(), "Ctrl-C to stop") }, "no banner:\n%s", logs)
			m := re.FindStringSubmatch(logs.String())
			if m == nil {
				t.Fatalf("no NATS address in the banner:\n%s", logs)
			}
			url := "nats://127.0.0.1:" + m[1]
			user, password := tt.env["SKILLBUS_NATS_USER"], tt.env["SKILLBUS_NATS_PASSWORD"]
			if password == "" {
				pm := regexp.MustCompile(`export SKILLBUS_NATS_USER=(\S+) SKILLBUS_NATS_PASSWORD=(\S+)`).FindStringSubmatch(logs.String())
				if pm == nil {
					t.Fatalf("no generated password in the banner:\n%s", logs)
				}
				user, password = pm[1], pm[2]
				if len(password) < 20 {
					t.Errorf("generated password %q is short", password)
				}
			} else if strings.Contains(logs.String(), password) {
				t.Errorf("the banner prints the password it was given:\n%s", logs)
			}
			if nc, err := nats.Connect(url); err == nil {
				nc.Close()
				t.Fatalf("a connection without credentials was taken on %s", url)
			} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Errorf("without credentials: %v, want an authorization error", err)
			}
			if nc, err := nats.Connect(url, nats.UserInfo(user, "wrong-"+password)); err == nil {
				nc.Close()
				t.Fatal("a wrong password was taken")
			}
			nc, err := nats.Connect(url, nats.UserInfo(user, password))
			if err != nil {
				t.Fatalf("with the credentials: %v", err)
			}
			defer nc.Close()
			// And the CLI, given them as the banner says, works.
			var out natstest.Buffer
			env := map[string]string{"SKILLBUS_NATS_URL": url, "SKILLBUS_NATS_USER": user, "SKILLBUS_NATS_PASSWORD": password}
			if err := cli.Skillbus(ctx, []string{"skills", "list"}, func(k string) string { return env[k] }, &out, &out); err != nil || !strings.Contains(out.String(), "hello") {
				t.Fatalf("skills list with the credentials: %v\n%s", err, out.String())
			}
		})
	}
}
